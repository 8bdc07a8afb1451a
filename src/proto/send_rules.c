/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the send rule chain (see send_rules.h).
 */
#include "send_rules.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const aptus_rule_chan_names[APTUS_RULE_CHAN_LAST] = {
    [APTUS_RULE_UD_SR] = "ud_sr", [APTUS_RULE_UD_ZCOPY] = "ud_zcopy",
    [APTUS_RULE_RC_SR] = "rc_sr", [APTUS_RULE_RC_RDMA] = "rc_rdma",
    [APTUS_RULE_RC_FP] = "rc_fp",
};

static const char *const aptus_rule_op_names[] = {
    [APTUS_RULE_LE] = "<=", [APTUS_RULE_LT] = "<",  [APTUS_RULE_GE] = ">=",
    [APTUS_RULE_GT] = ">",  [APTUS_RULE_EQ] = "==",
};

typedef struct aptus_rule_parser {
    const char *text;
    const char *p;
    aptus_rule_error_t *err;
} aptus_rule_parser_t;

static int aptus_rule_fail(aptus_rule_parser_t *ps, const char *at,
                           const char *fmt, ...)
{
    va_list ap;

    ps->err->position = (unsigned)(at - ps->text) + 1;
    va_start(ap, fmt);
    vsnprintf(ps->err->message, sizeof(ps->err->message), fmt, ap);
    va_end(ap);
    return -1;
}

static void aptus_rule_skip_space(aptus_rule_parser_t *ps)
{
    while ((*ps->p == ' ') || (*ps->p == '\t') || (*ps->p == '\n')) {
        ps->p++;
    }
}

static int aptus_rule_is_word(char c)
{
    return ((c >= 'a') && (c <= 'z')) || ((c >= 'A') && (c <= 'Z')) ||
           ((c >= '0') && (c <= '9')) || (c == '_');
}

/* The word at p (letters, digits, '_'), its length in *len. */
static int aptus_rule_word_is(const char *p, size_t len, const char *word)
{
    return (strlen(word) == len) && !strncmp(p, word, len);
}

/* A near miss: what a token that is not a channel was. */
static const char *aptus_rule_describe(const char *p)
{
    return (*p == '\0') ? "the end" : (*p == '}') ? "'}'" : "something else";
}

static int aptus_rule_parse_chan(aptus_rule_parser_t *ps, aptus_rule_t *rule)
{
    const char *start = ps->p;
    size_t len        = 0;
    unsigned i;

    while (aptus_rule_is_word(start[len])) {
        ++len;
    }
    if (len == 0) {
        return aptus_rule_fail(ps, start, "expected a channel, found %s",
                               aptus_rule_describe(start));
    }
    for (i = 0; i < APTUS_RULE_CHAN_LAST; ++i) {
        if (aptus_rule_word_is(start, len, aptus_rule_chan_names[i])) {
            rule->chan = i;
            ps->p      = start + len;
            return 0;
        }
    }
    return aptus_rule_fail(ps, start,
                           "unknown channel '%.*s' (expected rc_fp, rc_sr, "
                           "rc_rdma, ud_sr or ud_zcopy)",
                           (int)((len > 32) ? 32 : len), start);
}

static int aptus_rule_parse_number(aptus_rule_parser_t *ps, uint64_t *value)
{
    const char *start = ps->p;
    uint64_t v = 0, scale = 1;

    if ((*ps->p < '0') || (*ps->p > '9')) {
        return aptus_rule_fail(ps, start, "expected a number");
    }
    while ((*ps->p >= '0') && (*ps->p <= '9')) {
        if (v > (UINT64_MAX - 9) / 10) {
            return aptus_rule_fail(ps, start, "number too large");
        }
        v = v * 10 + (uint64_t)(*ps->p - '0');
        ps->p++;
    }
    if ((*ps->p == 'k') || (*ps->p == 'K')) {
        scale = 1024;
        ps->p++;
    } else if ((*ps->p == 'm') || (*ps->p == 'M')) {
        scale = 1024 * 1024;
        ps->p++;
    }
    if (v > UINT64_MAX / scale) {
        return aptus_rule_fail(ps, start, "number too large");
    }
    if (aptus_rule_is_word(*ps->p)) {
        return aptus_rule_fail(ps, ps->p, "unexpected '%c' after a number",
                               *ps->p);
    }
    *value = v * scale;
    return 0;
}

static int aptus_rule_parse_cond(aptus_rule_parser_t *ps,
                                 aptus_rule_cond_t *cond)
{
    static const struct {
        const char *text;
        aptus_rule_op_t op;
    } ops[] = { { "<=", APTUS_RULE_LE },
                { ">=", APTUS_RULE_GE },
                { "==", APTUS_RULE_EQ },
                { "<", APTUS_RULE_LT },
                { ">", APTUS_RULE_GT } };
    unsigned i;

    cond->subject = APTUS_RULE_SIZE;
    if (!strncmp(ps->p, "peers", 5) && !aptus_rule_is_word(ps->p[5])) {
        cond->subject = APTUS_RULE_PEERS;
        ps->p += 5;
        aptus_rule_skip_space(ps);
    }
    for (i = 0; i < sizeof(ops) / sizeof(ops[0]); ++i) {
        if (!strncmp(ps->p, ops[i].text, strlen(ops[i].text))) {
            cond->op = ops[i].op;
            ps->p += strlen(ops[i].text);
            aptus_rule_skip_space(ps);
            return aptus_rule_parse_number(ps, &cond->value);
        }
    }
    return aptus_rule_fail(ps, ps->p,
                           "expected a condition ('any', or <=, <, >=, >, == "
                           "and a size, optionally after 'peers')");
}

static int aptus_rule_parse_rule(aptus_rule_parser_t *ps, aptus_rule_t *rule)
{
    const char *cond_start, *cond_end;

    memset(rule, 0, sizeof(*rule));
    if (*ps->p != '{') {
        return aptus_rule_fail(ps, ps->p, "expected '{' to start a rule");
    }
    ps->p++;
    aptus_rule_skip_space(ps);
    for (;;) {
        cond_start = ps->p;
        if (!strncmp(ps->p, "any", 3) && !aptus_rule_is_word(ps->p[3]) &&
            (rule->num_conds == 0)) {
            ps->p += 3;
            cond_end = ps->p;
            aptus_rule_skip_space(ps);
            break;
        }
        if (rule->num_conds == APTUS_RULE_MAX_CONDS) {
            return aptus_rule_fail(ps, cond_start,
                                   "more than %d conditions in a rule",
                                   APTUS_RULE_MAX_CONDS);
        }
        if (aptus_rule_parse_cond(ps, &rule->conds[rule->num_conds]) != 0) {
            return -1;
        }
        rule->num_conds++;
        cond_end = ps->p;
        aptus_rule_skip_space(ps);
        if (*ps->p != '&') {
            break;
        }
        ps->p++;
        aptus_rule_skip_space(ps);
    }
    if (ps->p == cond_end) {
        return aptus_rule_fail(ps, ps->p,
                               "expected a space and a channel after the "
                               "condition");
    }
    if (aptus_rule_parse_chan(ps, rule) != 0) {
        return -1;
    }
    aptus_rule_skip_space(ps);
    if (*ps->p != '}') {
        return aptus_rule_fail(ps, ps->p, "expected '}' to end the rule");
    }
    ps->p++;
    return 0;
}

int aptus_rule_chain_parse(const char *text, aptus_rule_chain_t *chain,
                           aptus_rule_error_t *err)
{
    aptus_rule_parser_t ps = { text, text, err };
    const char *last_start = text;

    memset(chain, 0, sizeof(*chain));
    err->position   = 0;
    err->message[0] = '\0';
    aptus_rule_skip_space(&ps);
    if (*ps.p == '\0') {
        return aptus_rule_fail(&ps, ps.p, "the chain is empty");
    }
    for (;;) {
        if (chain->num_rules == APTUS_RULES_MAX) {
            return aptus_rule_fail(&ps, ps.p, "more than %d rules",
                                   APTUS_RULES_MAX);
        }
        last_start = ps.p;
        if (aptus_rule_parse_rule(&ps, &chain->rules[chain->num_rules]) != 0) {
            return -1;
        }
        chain->num_rules++;
        aptus_rule_skip_space(&ps);
        if (*ps.p == '\0') {
            break;
        }
        if (*ps.p != ',') {
            return aptus_rule_fail(&ps, ps.p,
                                   "expected ',' between rules or the end");
        }
        ps.p++;
        aptus_rule_skip_space(&ps);
    }
    if (!(APTUS_RULE_BIT(chain->rules[chain->num_rules - 1].chan) &
          APTUS_RULE_UD_CHANS)) {
        return aptus_rule_fail(&ps, last_start,
                               "the last rule must name a UD channel (ud_sr "
                               "or ud_zcopy), which every peer has");
    }
    return 0;
}

size_t aptus_rule_chain_format(const aptus_rule_chain_t *chain, char *buf,
                               size_t max)
{
    size_t len = 0;
    unsigned i, c;
    int n;

#define APTUS_RULE_PUT(...)                                                    \
    do {                                                                       \
        n = snprintf(buf + ((len < max) ? len : max),                          \
                     (len < max) ? max - len : 0, __VA_ARGS__);                \
        len += (n > 0) ? (size_t)n : 0;                                        \
    } while (0)

    if (max > 0) {
        buf[0] = '\0';
    }
    for (i = 0; i < chain->num_rules; ++i) {
        const aptus_rule_t *rule = &chain->rules[i];

        APTUS_RULE_PUT("%s{", (i > 0) ? "," : "");
        if (rule->num_conds == 0) {
            APTUS_RULE_PUT("any");
        }
        for (c = 0; c < rule->num_conds; ++c) {
            APTUS_RULE_PUT(
                "%s%s%s%llu", (c > 0) ? "&" : "",
                (rule->conds[c].subject == APTUS_RULE_PEERS) ? "peers" : "",
                aptus_rule_op_names[rule->conds[c].op],
                (unsigned long long)rule->conds[c].value);
        }
        APTUS_RULE_PUT(" %s}", aptus_rule_chan_names[rule->chan]);
    }
#undef APTUS_RULE_PUT
    return len;
}

unsigned aptus_rule_chain_channels(const aptus_rule_chain_t *chain)
{
    unsigned mask = 0, i;

    for (i = 0; i < chain->num_rules; ++i) {
        mask |= APTUS_RULE_BIT(chain->rules[i].chan);
    }
    return mask;
}

static int aptus_rule_cond_holds(const aptus_rule_cond_t *cond, uint64_t size,
                                 unsigned peers)
{
    uint64_t x = (cond->subject == APTUS_RULE_PEERS) ? peers : size;

    switch (cond->op) {
    case APTUS_RULE_LE:
        return x <= cond->value;
    case APTUS_RULE_LT:
        return x < cond->value;
    case APTUS_RULE_GE:
        return x >= cond->value;
    case APTUS_RULE_GT:
        return x > cond->value;
    default:
        return x == cond->value;
    }
}

static inline uint64_t aptus_rule_max_u64(uint64_t a, uint64_t b)
{
    return (a > b) ? a : b;
}

/* Where a condition on 'subject' starts or stops holding: each value where
 * some rule's condition changes, and the lowest value. Between two
 * neighbours every condition is constant, so testing these points tests
 * every value (those below 'lowest' are tested as 'lowest'). */
static unsigned aptus_rule_edges(const aptus_rule_chain_t *chain,
                                 unsigned subject, uint64_t lowest,
                                 uint64_t *edges)
{
    unsigned n = 0, i, c;
    uint64_t v;

    edges[n++] = lowest;
    for (i = 0; i < chain->num_rules; ++i) {
        for (c = 0; c < chain->rules[i].num_conds; ++c) {
            if (chain->rules[i].conds[c].subject != subject) {
                continue;
            }
            v          = chain->rules[i].conds[c].value;
            edges[n++] = aptus_rule_max_u64(v, lowest);
            if (v < UINT64_MAX) {
                edges[n++] = aptus_rule_max_u64(v + 1, lowest);
            }
        }
    }
    return n;
}

static int aptus_rule_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

int aptus_rule_chain_covers(const aptus_rule_chain_t *chain, uint64_t *size_p,
                            uint64_t *peers_p)
{
    uint64_t sizes[1 + 2 * APTUS_RULES_MAX * APTUS_RULE_MAX_CONDS];
    uint64_t peers[1 + 2 * APTUS_RULES_MAX * APTUS_RULE_MAX_CONDS];
    unsigned num_sizes, num_peers, s, p, i, c;

    num_sizes = aptus_rule_edges(chain, APTUS_RULE_SIZE, 0, sizes);
    /* a message goes to a peer: the process talks to one at least */
    num_peers = aptus_rule_edges(chain, APTUS_RULE_PEERS, 1, peers);
    /* sorted, so that the gap reported is the smallest */
    qsort(sizes, num_sizes, sizeof(sizes[0]), aptus_rule_u64_cmp);
    qsort(peers, num_peers, sizeof(peers[0]), aptus_rule_u64_cmp);
    for (s = 0; s < num_sizes; ++s) {
        for (p = 0; p < num_peers; ++p) {
            if (peers[p] > UINT_MAX) {
                break; /* a process never talks to more */
            }
            for (i = 0; i < chain->num_rules; ++i) {
                const aptus_rule_t *rule = &chain->rules[i];

                if (!(APTUS_RULE_BIT(rule->chan) & APTUS_RULE_UD_CHANS)) {
                    continue;
                }
                for (c = 0; c < rule->num_conds; ++c) {
                    if (!aptus_rule_cond_holds(&rule->conds[c], sizes[s],
                                               (unsigned)peers[p])) {
                        break;
                    }
                }
                if (c == rule->num_conds) {
                    break;
                }
            }
            if (i == chain->num_rules) {
                *size_p  = sizes[s];
                *peers_p = peers[p];
                return 0;
            }
        }
    }
    return 1;
}

/* A data channel's rule also places the active messages of its sizes
 * that the user sends eagerly (UCP sends up to UD's largest message so,
 * beyond the eager rules' 8 KB): over the connection's send/receive, or
 * UD's, as the paper's rendezvous went over the connection or UD. */
static aptus_rule_chan_t aptus_rule_chan_of_kind(aptus_rule_chan_t chan,
                                                 unsigned kind)
{
    if (kind != APTUS_RULE_EAGER_CHANS) {
        return chan;
    }
    switch (chan) {
    case APTUS_RULE_RC_RDMA:
        return APTUS_RULE_RC_SR;
    case APTUS_RULE_UD_ZCOPY:
        return APTUS_RULE_UD_SR;
    default:
        return chan;
    }
}

aptus_rule_chan_t aptus_rule_chain_select(const aptus_rule_chain_t *chain,
                                          unsigned kind, uint64_t size,
                                          unsigned peers, unsigned allocated,
                                          unsigned *rule_p)
{
    unsigned usable = (allocated | APTUS_RULE_UD_CHANS) & kind;
    aptus_rule_chan_t chan;
    unsigned i, c;

    for (i = 0; i < chain->num_rules; ++i) {
        const aptus_rule_t *rule = &chain->rules[i];

        chan = aptus_rule_chan_of_kind((aptus_rule_chan_t)rule->chan, kind);
        if (!(APTUS_RULE_BIT(chan) & usable)) {
            continue;
        }
        for (c = 0; c < rule->num_conds; ++c) {
            if (!aptus_rule_cond_holds(&rule->conds[c], size, peers)) {
                break;
            }
        }
        if (c == rule->num_conds) {
            *rule_p = i;
            return chan;
        }
    }
    *rule_p = chain->num_rules;
    return (kind & APTUS_RULE_BIT(APTUS_RULE_UD_SR)) ? APTUS_RULE_UD_SR
                                                     : APTUS_RULE_UD_ZCOPY;
}
