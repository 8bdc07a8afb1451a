/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the aptus transport's settings: the table UCX reads them with,
 * their checks, the rule chain and the allocator's configuration they make.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_tl.h"

#include <ucs/sys/math.h>

#include <inttypes.h>
#include <string.h>

/* The rule chain of the paper (Koop et al., IPDPS 2008, section 4.2). */
#define UCT_APTUS_DEFAULT_RULES                                                \
    "{<=2048 rc_fp},{<=2008 ud_sr},{<=8192 rc_sr},{<=8192 ud_sr},"             \
    "{any rc_rdma},{any ud_zcopy}"

ucs_config_field_t uct_aptus_tl_iface_config_table[] = {
    { "", "", NULL, ucs_offsetof(uct_aptus_tl_iface_config_t, super),
      UCS_CONFIG_TYPE_TABLE(uct_iface_config_table) },

    /* the UD channels: the same settings as ud_sr, under APTUS_ */
    { "", "", NULL, ucs_offsetof(uct_aptus_tl_iface_config_t, ud),
      UCS_CONFIG_TYPE_TABLE(uct_ud_sr_params_table) },

    { "SEND_RULES", UCT_APTUS_DEFAULT_RULES,
      "The send rule chain: for each message, the first rule whose conditions\n"
      "hold and whose channel the peer already has sends it. Rules are\n"
      "{<conditions> <channel>}, separated by commas; conditions are 'any' or\n"
      "comparisons joined by '&': <=N, <N, >=N, >N, ==N on the message size\n"
      "(k and m suffixes), or 'peers' then a comparison on the number of "
      "peers\n"
      "the process talks to. Channels: rc_fp, rc_sr, ud_sr (active messages),\n"
      "rc_rdma, ud_zcopy (rendezvous data). The last rule must name a UD\n"
      "channel, and the rules naming UD channels together must hold every\n"
      "message size (end the chain with {any ud_sr} or {any ud_zcopy}).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, send_rules),
      UCS_CONFIG_TYPE_STRING },

    { "MAX_RC", "16",
      "Most RC connections (RC-SR + RC-RDMA) one process holds at once; both\n"
      "sides reserve a slot before a connection is used, so the cap holds\n"
      "even when two processes ask each other at the same time. 0: UD only\n"
      "(at most 65536).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, max_rc), UCS_CONFIG_TYPE_UINT },

    { "MAX_FP", "8",
      "Most fast-path (RC-FP) channels one process holds (at most MAX_RC): a\n"
      "block of FP_BLOCK_SIZE bytes of its memory per channel, mapped at\n"
      "interface open, that one peer writes messages into and this process\n"
      "polls. Both sides reserve a slot before a channel is used (0 to 4096;\n"
      "0: none).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, max_fp), UCS_CONFIG_TYPE_UINT },

    { "FP_MSGS", "64",
      "Messages small enough for an rc_fp rule, sent to a peer that holds RC\n"
      "within ALLOC_WINDOW, that earn it a fast-path channel (0: none ever;\n"
      "so too when no rule names rc_fp; at most 1048576).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, fp_msgs),
      UCS_CONFIG_TYPE_UINT },

    { "FP_BLOCK_SIZE", "32k",
      "Bytes of one fast-path block (a Veloblock ring: messages of any\n"
      "length packed from its end, byte credits; 64 to 1g).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, fp_block_size),
      UCS_CONFIG_TYPE_MEMUNITS },

    { "ALLOC_WINDOW", "1s",
      "Traffic window of the earning rule: a peer earns an RC connection when\n"
      "one window holds RC_MSGS messages or RC_BYTES bytes sent to it that\n"
      "the rule chain would send over RC or its fast path (those it keeps on\n"
      "UD anyway do not count). 1ms to 1h.",
      ucs_offsetof(uct_aptus_tl_iface_config_t, alloc_window),
      UCS_CONFIG_TYPE_TIME },

    { "RC_MSGS", "64",
      "Messages to one peer within ALLOC_WINDOW that earn it a connection\n"
      "(0: messages do not count; at most 1048576).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, rc_msgs),
      UCS_CONFIG_TYPE_UINT },

    { "RC_BYTES", "1m",
      "Bytes to one peer within ALLOC_WINDOW that earn it a connection\n"
      "(0: bytes do not count; at most 1g). RC_MSGS and RC_BYTES may not both\n"
      "be 0.",
      ucs_offsetof(uct_aptus_tl_iface_config_t, rc_bytes),
      UCS_CONFIG_TYPE_MEMUNITS },

    { "REQUEST_TIMEOUT", "1s",
      "A request for a connection left unanswered this long gives its slot\n"
      "back (1ms to 1h).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, request_timeout),
      UCS_CONFIG_TYPE_TIME },

    { "BACKOFF", "1s",
      "After a refusal, the peer is not asked again for this long (0 to 1h).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, backoff),
      UCS_CONFIG_TYPE_TIME },

    { "IDLE", "2s",
      "A connection unused this long is demoted (its slot goes to a peer that\n"
      "earns it); 0: never (at most 1h).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, idle), UCS_CONFIG_TYPE_TIME },

    { "HOLD", "1s",
      "Shortest life of a connection, and the wait before a demoted peer may\n"
      "ask again: the hysteresis that keeps channels from flapping (0 to\n"
      "1h).",
      ucs_offsetof(uct_aptus_tl_iface_config_t, hold), UCS_CONFIG_TYPE_TIME },

    { "REORDER_MAX", "65536",
      "Messages of one peer held while an earlier one is still on its way\n"
      "over another channel. Beyond it the peer is failed (order could not be\n"
      "kept). 1 to 16777216.",
      ucs_offsetof(uct_aptus_tl_iface_config_t, reorder_max),
      UCS_CONFIG_TYPE_UINT },

    /* the RC channels: the same settings as rc_sr, under APTUS_RC_; a
     * connection's buffers hold what the rule chain sends over RC, and
     * the pool never grows (messages are delivered in place) */
    UCT_RC_PARAMS_FIELDS("RC_", ucs_offsetof(uct_aptus_tl_iface_config_t, rc),
                         "32k", "256"),

    { NULL }
};

/* The transport's own settings, and the RC channels' as rc_sr's (the UD
 * channels' are checked with ud_sr's). Times: negative ones wrapped into hours,
 * a zero window or request timeout means nothing. */
ucs_status_t
uct_aptus_tl_iface_check_config(const aptus_wire_dev_ops_t *wdev,
                                const uct_aptus_tl_iface_config_t *config)
{
    const uct_aptus_time_range_t times[] = {
        { "ALLOC_WINDOW", config->alloc_window, 1e-3, 3600.0 },
        { "REQUEST_TIMEOUT", config->request_timeout, 1e-3, 3600.0 },
        { "BACKOFF", config->backoff, 0.0, 3600.0 },
        { "IDLE", config->idle, 0.0, 3600.0 },
        { "HOLD", config->hold, 0.0, 3600.0 },
    };
    const uct_aptus_range_t counts[] = {
        { "MAX_RC", uct_aptus_uint(config->max_rc), 0, 65536 },
        { "MAX_FP", uct_aptus_uint(config->max_fp), 0, 4096 },
        { "FP_MSGS", uct_aptus_uint(config->fp_msgs), 0, 1048576 },
        { "FP_BLOCK_SIZE", uct_aptus_bytes(config->fp_block_size),
          APTUS_VB_MIN_SIZE, APTUS_VB_MAX_SIZE },
        { "RC_MSGS", uct_aptus_uint(config->rc_msgs), 0, 1048576 },
        { "RC_BYTES", uct_aptus_bytes(config->rc_bytes), 0, UCS_GBYTE },
        { "REORDER_MAX", uct_aptus_uint(config->reorder_max), 1, 16777216 },
    };

    if (!uct_aptus_iface_config_check(
            UCT_APTUS_TL_NAME, UCT_APTUS_TL_CONFIG_PREFIX, &config->super) ||
        !uct_aptus_time_ranges_check(UCT_APTUS_TL_NAME,
                                     UCT_APTUS_TL_CONFIG_PREFIX, times,
                                     ucs_static_array_size(times)) ||
        !uct_aptus_ranges_check(UCT_APTUS_TL_NAME, UCT_APTUS_TL_CONFIG_PREFIX,
                                counts, ucs_static_array_size(counts)) ||
        (uct_rc_params_check(
             &config->rc, UCT_APTUS_TL_NAME, UCT_APTUS_TL_CONFIG_PREFIX "RC_",
             UCT_APTUS_TRAILER_LEN, wdev->conn_max_msg) != UCS_OK)) {
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

ucs_status_t uct_aptus_tl_iface_rules(uct_aptus_tl_iface_t *iface,
                                      const uct_aptus_tl_iface_config_t *config)
{
    aptus_rule_error_t err;
    uint64_t size, peers;

    if (aptus_rule_chain_parse(config->send_rules, &iface->rules, &err) != 0) {
        ucs_error(
            "aptus: invalid configuration: UCX_" UCT_APTUS_TL_CONFIG_PREFIX
            "SEND_RULES=\"%s\": at character %u: %s",
            config->send_rules, err.position, err.message);
        return UCS_ERR_INVALID_PARAM;
    }
    if (!aptus_rule_chain_covers(&iface->rules, &size, &peers)) {
        ucs_error(
            "aptus: invalid configuration: UCX_" UCT_APTUS_TL_CONFIG_PREFIX
            "SEND_RULES=\"%s\": a message of %" PRIu64 " bytes (with %" PRIu64
            " peers) matches no rule of a UD channel, which "
            "every peer has; end the chain with {any ud_sr} or "
            "{any ud_zcopy}",
            config->send_rules, size, peers);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

/* The largest message size a rule admits (capped at 64 KB, more than a
 * fast-path message may hold), 0 when none. */
static uint32_t uct_aptus_tl_rule_max_size(const aptus_rule_t *rule)
{
    uint64_t max = UINT16_MAX;
    unsigned i;

    for (i = 0; i < rule->num_conds; ++i) {
        if (rule->conds[i].subject != APTUS_RULE_SIZE) {
            continue;
        }
        switch (rule->conds[i].op) {
        case APTUS_RULE_LE:
        case APTUS_RULE_EQ:
            max = ucs_min(max, rule->conds[i].value);
            break;
        case APTUS_RULE_LT:
            max = (rule->conds[i].value == 0)
                      ? 0
                      : ucs_min(max, rule->conds[i].value - 1);
            break;
        default:
            break;
        }
    }
    return (uint32_t)max;
}

ucs_status_t
uct_aptus_tl_iface_alloc_init(uct_aptus_tl_iface_t *iface,
                              const uct_aptus_tl_iface_config_t *config)
{
    aptus_alloc_config_t ac;
    const char *bad;
    uint32_t fp_max_size = 0;
    unsigned i;

    /* the largest message an rc_fp rule takes: what earns a fast path */
    for (i = 0; i < iface->rules.num_rules; ++i) {
        if (iface->rules.rules[i].chan == APTUS_RULE_RC_FP) {
            fp_max_size =
                ucs_max(fp_max_size,
                        uct_aptus_tl_rule_max_size(&iface->rules.rules[i]));
        }
    }
    memset(&ac, 0, sizeof(ac));
    ac.max[APTUS_ALLOC_RC] = config->max_rc;
    /* a fast path needs RC: MAX_RC=0 (UD only) turns them off too, and so
     * does a chain without an rc_fp rule */
    ac.max[APTUS_ALLOC_FP] =
        (fp_max_size == 0) ? 0 : ucs_min(config->max_fp, config->max_rc);
    ac.window_us          = uct_ud_sr_usec(config->alloc_window);
    ac.rc_msgs            = config->rc_msgs;
    ac.rc_bytes           = config->rc_bytes;
    ac.fp_msgs            = (ac.max[APTUS_ALLOC_FP] == 0) ? 0 : config->fp_msgs;
    ac.fp_max_size        = (fp_max_size == 0) ? 2048 : fp_max_size;
    ac.request_timeout_us = uct_ud_sr_usec(config->request_timeout);
    ac.backoff_us         = uct_ud_sr_usec(config->backoff);
    ac.idle_us            = uct_ud_sr_usec(config->idle);
    ac.hold_us            = uct_ud_sr_usec(config->hold);
    bad                   = aptus_alloc_config_check(&ac);
    if (bad != NULL) {
        ucs_error(
            "aptus: invalid configuration: %s (UCX_" UCT_APTUS_TL_CONFIG_PREFIX
            "MAX_RC=%u, MAX_FP=%u, "
            "RC_MSGS=%u, RC_BYTES=%zu)",
            bad, config->max_rc, config->max_fp, config->rc_msgs,
            config->rc_bytes);
        return UCS_ERR_INVALID_PARAM;
    }
    aptus_alloc_init(&iface->alloc, &ac);
    return UCS_OK;
}
