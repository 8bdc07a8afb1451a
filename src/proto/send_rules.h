/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the send rule chain of the aptus transport.
 *
 * Pure logic, free of UCX and of any wire. Koop et al., "MVAPICH-Aptus:
 * Scalable High-Performance Multi-Transport MPI over InfiniBand", IPDPS
 * 2008, section 4.2: every message walks an ordered list of rules; the
 * first whose conditions hold and whose channel is already allocated to
 * the destination peer sends it. The last rule names a UD channel, which
 * every peer always has.
 *
 * Grammar (spaces allowed between tokens; UCX_APTUS_SEND_RULES):
 *
 *   chain      = rule *( "," rule )
 *   rule       = "{" conditions channel "}"
 *   conditions = "any" / condition *( "&" condition )
 *   condition  = [ "peers" ] op number [ "k" / "m" ]
 *   op         = "<=" / "<" / ">=" / ">" / "=="
 *   channel    = "rc_fp" / "rc_sr" / "rc_rdma" / "ud_sr" / "ud_zcopy"
 *
 * A condition without "peers" is on the message size in bytes; "peers" is
 * the number of peers the process talks to. k and m scale by 1024 and
 * 1024*1024. Example (the paper's chain, the default):
 *
 *   {<=2048 rc_fp},{<=2008 ud_sr},{<=8192 rc_sr},{<=8192 ud_sr},
 *   {any rc_rdma},{any ud_zcopy}
 *
 * Eager channels (rc_fp, rc_sr, ud_sr) carry active messages; data
 * channels (rc_rdma, ud_zcopy) carry rendezvous and RMA data. Rendezvous
 * data only considers the rules of data channels. An active message
 * considers every rule, a data channel's as its eager twin on the same
 * link (rc_rdma: rc_sr, ud_zcopy: ud_sr): the paper moved messages above
 * the eager rules by rendezvous over the peer's connection or UD, where
 * UCP sends them eagerly up to UD's largest message. When no rule applies
 * a message goes over the UD channel of its kind.
 */
#ifndef APTUS_SEND_RULES_H_
#define APTUS_SEND_RULES_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The channels a rule can name (the order of the channel interface's). */
typedef enum aptus_rule_chan {
    APTUS_RULE_UD_SR,
    APTUS_RULE_UD_ZCOPY,
    APTUS_RULE_RC_SR,
    APTUS_RULE_RC_RDMA,
    APTUS_RULE_RC_FP,
    APTUS_RULE_CHAN_LAST
} aptus_rule_chan_t;

#define APTUS_RULE_BIT(_chan) (1u << (_chan))
#define APTUS_RULE_EAGER_CHANS                                                 \
    (APTUS_RULE_BIT(APTUS_RULE_UD_SR) | APTUS_RULE_BIT(APTUS_RULE_RC_SR) |     \
     APTUS_RULE_BIT(APTUS_RULE_RC_FP))
#define APTUS_RULE_DATA_CHANS                                                  \
    (APTUS_RULE_BIT(APTUS_RULE_UD_ZCOPY) | APTUS_RULE_BIT(APTUS_RULE_RC_RDMA))
#define APTUS_RULE_UD_CHANS                                                    \
    (APTUS_RULE_BIT(APTUS_RULE_UD_SR) | APTUS_RULE_BIT(APTUS_RULE_UD_ZCOPY))

typedef enum aptus_rule_subject {
    APTUS_RULE_SIZE,
    APTUS_RULE_PEERS
} aptus_rule_subject_t;

typedef enum aptus_rule_op {
    APTUS_RULE_LE,
    APTUS_RULE_LT,
    APTUS_RULE_GE,
    APTUS_RULE_GT,
    APTUS_RULE_EQ
} aptus_rule_op_t;

typedef struct aptus_rule_cond {
    uint8_t subject; /* aptus_rule_subject_t */
    uint8_t op;      /* aptus_rule_op_t */
    uint64_t value;
} aptus_rule_cond_t;

#define APTUS_RULE_MAX_CONDS 4
#define APTUS_RULES_MAX      16

typedef struct aptus_rule {
    uint8_t chan;      /* aptus_rule_chan_t */
    uint8_t num_conds; /* 0: any */
    aptus_rule_cond_t conds[APTUS_RULE_MAX_CONDS];
} aptus_rule_t;

typedef struct aptus_rule_chain {
    unsigned num_rules;
    aptus_rule_t rules[APTUS_RULES_MAX];
} aptus_rule_chain_t;

typedef struct aptus_rule_error {
    unsigned position; /* 1-based character of the error */
    char message[160];
} aptus_rule_error_t;

extern const char *const aptus_rule_chan_names[APTUS_RULE_CHAN_LAST];

/* Parse text into chain. Returns 0, or -1 with err filled in: a syntax
 * error, an unknown channel, a number out of range, too many rules or
 * conditions, or a last rule that does not name a UD channel. */
int aptus_rule_chain_parse(const char *text, aptus_rule_chain_t *chain,
                           aptus_rule_error_t *err);

/* Whether the rules naming a UD channel, which every peer has, together
 * take a message of every size at every number of peers. A chain that
 * leaves a gap parses, and its gap would go to UD by the fallback without
 * the user knowing: the transport refuses it. Returns 1, or 0 with the
 * smallest size left (and the smallest number of peers at that size) in
 * *size_p and *peers_p. */
int aptus_rule_chain_covers(const aptus_rule_chain_t *chain, uint64_t *size_p,
                            uint64_t *peers_p);

/* The chain in the grammar's canonical form; returns the length it needs
 * (as snprintf). */
size_t aptus_rule_chain_format(const aptus_rule_chain_t *chain, char *buf,
                               size_t max);

/* Channels the chain names (a mask of APTUS_RULE_BIT). */
unsigned aptus_rule_chain_channels(const aptus_rule_chain_t *chain);

/* The channel for a message of 'size' bytes to a peer whose allocated
 * channels are 'allocated' (a mask; UD channels are always there), in a
 * process talking to 'peers' peers; 'kind' is APTUS_RULE_EAGER_CHANS or
 * APTUS_RULE_DATA_CHANS. Also returns the index of the rule that chose it
 * in *rule_p (num_rules when none did and UD was the fallback). */
aptus_rule_chan_t aptus_rule_chain_select(const aptus_rule_chain_t *chain,
                                          unsigned kind, uint64_t size,
                                          unsigned peers, unsigned allocated,
                                          unsigned *rule_p);

#ifdef __cplusplus
}
#endif

#endif
