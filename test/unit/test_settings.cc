/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every setting has a range (DESIGN.md): a table of bad values of every
 * transport's settings, each refused at interface open with an error that
 * names the variable as the user types it (and its range, where the value
 * alone is out of it), and of the edge values that mean something, which
 * open. Issue 28, item 6: some hung ucx_perftest, some made a job crawl,
 * some blamed another variable or said only "Out of memory".
 */
#include "uct_fixture.h"

extern "C" {
#include <ucs/config/parser.h>
#include <ucs/debug/log.h>

extern ucs_config_field_t uct_ud_sr_params_table[];
extern ucs_config_field_t uct_rc_params_table[];
extern ucs_config_field_t uct_rc_sr_iface_config_table[];
extern ucs_config_field_t uct_rc_fp_iface_config_table[];
extern ucs_config_field_t uct_aptus_tl_iface_config_table[];
}

#include <cstdarg>
#include <string>
#include <vector>

namespace
{

std::string logged_errors;

ucs_log_func_rc_t capture_errors(const char *file, unsigned line,
                                 const char *function, ucs_log_level_t level,
                                 const ucs_log_component_config_t *comp_conf,
                                 const char *message, va_list ap)
{
    char buf[1024];
    va_list copy;

    if (level != UCS_LOG_LEVEL_ERROR) {
        return UCS_LOG_FUNC_RC_CONTINUE;
    }
    va_copy(copy, ap);
    vsnprintf(buf, sizeof(buf), message, copy);
    va_end(copy);
    logged_errors += buf;
    logged_errors += "\n";
    return UCS_LOG_FUNC_RC_STOP;
}

/* Where a row applies: the UD settings belong to ud_sr and aptus, rc_sr's
 * to rc_sr and rc_fp (each under its own prefix), UCT's own to all. */
enum { UD = 1, RC = 2, FP = 4, AP = 8, ALL = UD | RC | FP | AP };

struct transport {
    unsigned bit;
    const char *tl;
    const char *prefix;
};

const transport transports[] = { { UD, "ud_sr", "UD_SR_" },
                                 { RC, "rc_sr", "RC_SR_" },
                                 { FP, "rc_fp", "RC_FP_" },
                                 { AP, "aptus", "APTUS_" } };

struct bad_value {
    unsigned where;
    const char *name;
    const char *value;
    bool range; /* the error gives the range ("out of range [") */
};

const unsigned UD_AP = UD | AP;
const unsigned RC_FP = RC | FP;

const std::vector<bad_value> bad_values = {
    /* UCT's own: an empty list said only "Out of memory" later */
    { ALL, "ALLOC", "", false },
    { ALL, "MAX_NUM_EPS", "0", true },
    /* the UD channels' times */
    { UD_AP, "TIMER_TICK", "-1", true },
    { UD_AP, "TIMER_TICK", "0", true },
    { UD_AP, "TIMER_TICK", "1000s", true },
    { UD_AP, "ASYNC_INTERVAL", "0", true },
    { UD_AP, "ASYNC_INTERVAL", "-5ms", true },
    { UD_AP, "ASYNC_INTERVAL", "11s", true },
    { UD_AP, "ASYNC_INTERVAL_MAX", "-1", true },
    { UD_AP, "ASYNC_INTERVAL_MAX", "61s", true },
    { UD_AP, "PROBE_MIN", "-1us", true },
    { UD_AP, "PROBE_MIN", "11s", true },
    { UD_AP, "RTO_MIN", "-1", true },
    { UD_AP, "RTO_MIN", "0", true },
    { UD_AP, "RTO_MAX", "1ms", true },
    { UD_AP, "RTO_MAX", "7200s", true },
    { UD_AP, "RTO_INIT", "-1", true },
    { UD_AP, "RTO_INIT", "1us", true },
    { UD_AP, "TIMEOUT", "-1", true },
    { UD_AP, "TIMEOUT", "0", true },
    { UD_AP, "FAULT_DELAY_TIME", "-1ms", true },
    { UD_AP, "FAULT_DELAY_TIME", "11s", true },
    /* the UD channels' counts and sizes (-1 reads as the largest) */
    { UD_AP, "MTU", "100", true },
    { UD_AP, "MTU", "100000", true },
    { UD_AP, "MTU", "-1", true },
    { UD_AP, "SEG_SIZE", "16", true },
    { UD_AP, "SEG_SIZE", "128m", true },
    { UD_AP, "SEG_SIZE", "-1", true },
    { UD_AP, "TX_WINDOW", "0", true },
    { UD_AP, "TX_WINDOW", "2000", true },
    { UD_AP, "TX_WINDOW", "-1", true },
    { UD_AP, "TX_WINDOW_BYTES", "0", true },
    { UD_AP, "RX_BATCH", "0", true },
    { UD_AP, "RX_BATCH", "2000", true },
    { UD_AP, "RX_QUEUE_LEN", "0", true },
    { UD_AP, "RX_QUEUE_LEN", "63", true },
    { UD_AP, "RX_QUEUE_LEN", "-1", true },
    { UD_AP, "RX_MAX_BUFS", "0", true }, /* blamed RX_QUEUE_LEN */
    { UD_AP, "RX_MAX_BUFS", "63", true },
    { UD_AP, "RX_MAX_BUFS", "-1", true },
    { UD_AP, "RX_MAX_POLL", "0", true },
    { UD_AP, "RX_MAX_POLL", "-1", true },
    { UD_AP, "ACK_COUNT", "0", true },
    { UD_AP, "ACK_COUNT", "-1", true },
    { UD_AP, "MAX_PEERS", "0", true },
    { UD_AP, "MAX_PEERS", "-1", true },
    { UD_AP, "RX_MAX_REASM", "0", true },
    { UD_AP, "RX_MAX_REASM", "-1", true },
    { UD_AP, "ZCOPY_CONTEXTS", "-1", true }, /* was "Out of memory" */
    { UD_AP, "ZCOPY_CONTEXTS", "5000", true },
    { UD_AP, "ZCOPY_WINDOW", "2", true },
    { UD_AP, "ZCOPY_WINDOW", "-1", true },
    { UD_AP, "ZCOPY_MAX_SERVED", "0", true },
    { UD_AP, "ZCOPY_MAX_SERVED", "-1", true },
    { UD_AP, "ZCOPY_MAX", "0", true },
    { UD_AP, "ZCOPY_MAX", "2g", true },
    { UD_AP, "ZCOPY_MAX", "-1", true },
    { UD_AP, "FAULT_DROP", "1.5", false },
    { UD_AP, "FAULT_DUP", "-0.1", false },
    { UD_AP, "FAULT_REORDER", "2", false },
    { UD_AP, "FAULT_DELAY", "-1", false },
    /* rc_sr's, also under rc_fp's prefix */
    { RC_FP, "SEG_SIZE", "16", true },
    { RC_FP, "SEG_SIZE", "64m", true },
    { RC_FP, "SEG_SIZE", "-1", true },
    { RC_FP, "CREDITS", "0", true },
    { RC_FP, "CREDITS", "70000", true },
    { RC_FP, "CREDITS", "-1", true },
    { RC_FP, "RX_QUEUE_LEN", "0", true },
    { RC_FP, "RX_QUEUE_LEN", "-1", true },
    { RC_FP, "RX_MAX_BUFS", "0", true },
    { RC_FP, "RX_MAX_BUFS", "-1", true },
    { RC_FP, "RX_COPY_THRESH", "9k", true },
    { RC_FP, "RX_COPY_THRESH", "-1", true },
    { RC_FP, "TX_BACKLOG", "0", true },
    { RC_FP, "TX_BACKLOG", "2g", true },
    { RC_FP, "TX_BACKLOG", "-1", true },
    /* rc_fp's own */
    { FP, "MAX_CHANNELS", "0", true },
    { FP, "MAX_CHANNELS", "5000", true },
    { FP, "MAX_CHANNELS", "-1", true },
    { FP, "THRESH", "0", true },
    { FP, "THRESH", "-1", true },
    { FP, "BLOCK_SIZE", "16", true },
    { FP, "BLOCK_SIZE", "2g", true },
    { FP, "BLOCK_SIZE", "-1", true },
    { FP, "SLOTS", "0", true },
    { FP, "SLOTS", "-1", true },
    { FP, "SLOT_SIZE", "0", true },
    { FP, "SLOT_SIZE", "4", true },
    { FP, "SLOT_SIZE", "70000", true },
    { FP, "SLOT_SIZE", "-1", true },
    { FP, "MAX_MSG", "0", true },
    { FP, "MAX_MSG", "70000", true },
    { FP, "MAX_MSG", "-1", true },
    { FP, "WIRE_POLL", "0", true },
    { FP, "WIRE_POLL", "1025", true },
    { FP, "WIRE_POLL", "-1", true },
    /* aptus's own */
    { AP, "MAX_RC", "-1", true },
    { AP, "MAX_FP", "5000", true },
    { AP, "MAX_FP", "-1", true },
    { AP, "FP_MSGS", "-1", true },
    { AP, "FP_BLOCK_SIZE", "16", true },
    { AP, "FP_BLOCK_SIZE", "-1", true },
    { AP, "ALLOC_WINDOW", "0", true },
    { AP, "ALLOC_WINDOW", "-1", true },
    { AP, "ALLOC_WINDOW", "7200s", true },
    { AP, "RC_MSGS", "-1", true },
    { AP, "RC_BYTES", "2g", true },
    { AP, "RC_BYTES", "-1", true },
    { AP, "REQUEST_TIMEOUT", "0", true },
    { AP, "REQUEST_TIMEOUT", "-1", true },
    { AP, "BACKOFF", "-1", true },
    { AP, "BACKOFF", "7200s", true },
    { AP, "IDLE", "-1", true },
    { AP, "IDLE", "7200s", true },
    { AP, "HOLD", "-1", true },
    { AP, "HOLD", "7200s", true },
    { AP, "REORDER_MAX", "0", true },
    { AP, "REORDER_MAX", "-1", true },
    { AP, "RC_SEG_SIZE", "16", true },
    { AP, "RC_SEG_SIZE", "64m", true },
    { AP, "RC_CREDITS", "0", true },
    { AP, "RC_CREDITS", "70000", true },
    { AP, "RC_RX_QUEUE_LEN", "0", true },
    { AP, "RC_RX_QUEUE_LEN", "-1", true },
    { AP, "RC_TX_BACKLOG", "0", true },
    { AP, "RC_TX_BACKLOG", "-1", true },
    /* chains that leave sizes (or peer counts) with no UD rule */
    { AP, "SEND_RULES", "{<=8k ud_sr}", false },
    { AP, "SEND_RULES", "{<=2048 rc_fp},{<=8192 rc_sr},{<=8192 ud_sr}", false },
    { AP, "SEND_RULES", "{>0 ud_sr}", false },
    { AP, "SEND_RULES", "{peers<=16 ud_sr}", false },
    { AP, "SEND_RULES", "{any rc_sr},{<1m ud_sr},{>1m ud_zcopy}", false },
};

struct good_value {
    unsigned where;
    const char *name;
    const char *value;
};

/* the edges, and the values with a meaning of their own */
const std::vector<good_value> good_values = {
    { UD_AP, "PROBE_MIN", "0" },         /* no probes */
    { UD_AP, "TIMEOUT", "inf" },         /* never */
    { UD_AP, "TX_WINDOW_BYTES", "inf" }, /* datagrams alone */
    { UD_AP, "TX_WINDOW_BYTES", "1" },   /* one message at a time */
    { UD_AP, "TX_WINDOW", "1024" },
    { UD_AP, "ASYNC_INTERVAL", "100us" },
    { UD_AP, "ASYNC_INTERVAL", "10s" },
    { UD_AP, "TIMER_TICK", "1us" },
    { UD_AP, "RX_QUEUE_LEN", "64" },  /* twice RX_BATCH */
    { UD_AP, "RX_MAX_BUFS", "64" },   /* caps the queue */
    { UD_AP, "ZCOPY_CONTEXTS", "0" }, /* the copy path for all */
    { UD_AP, "ZCOPY_WINDOW", "4" },
    { UD_AP, "ZCOPY_THRESH", "0" },
    { UD_AP, "ZCOPY_THRESH", "inf" }, /* no zero-copy get */
    { UD_AP, "FAULT_DELAY_TIME", "0" },
    { RC_FP, "CREDITS", "1" },
    { RC_FP, "CREDITS", "65535" },
    { RC_FP, "RX_QUEUE_LEN", "1" },
    { RC_FP, "RX_COPY_THRESH", "0" },  /* all in place */
    { RC_FP, "RX_COPY_THRESH", "8k" }, /* SEG_SIZE */
    { RC_FP, "TX_BACKLOG", "4k" },
    { FP, "WIRE_POLL", "1024" },
    { FP, "THRESH", "1" },
    { FP, "MAX_MSG", "1" },
    { FP, "MAX_CHANNELS", "1" },
    { AP, "MAX_RC", "0" }, /* UD only */
    { AP, "MAX_FP", "0" },
    { AP, "FP_MSGS", "0" },
    { AP, "RC_MSGS", "0" }, /* bytes alone */
    { AP, "IDLE", "0" },    /* never demoted */
    { AP, "BACKOFF", "0" },
    { AP, "HOLD", "0" },
    { AP, "ALLOC_WINDOW", "1ms" },
    { AP, "SEND_RULES", "{peers<=16 ud_sr},{peers>16 ud_zcopy}" },
    { AP, "SEND_RULES", "{<=8k rc_sr},{<=8k ud_sr},{>8k ud_zcopy}" },
};

} // namespace

class settings : public uct_aptus_test
{
  protected:
    /* open m_a of tl with one setting; the errors it logged */
    ucs_status_t open_with(const transport &t, const char *name,
                           const char *value, std::string &errors)
    {
        m_tl = t.tl;
        logged_errors.clear();
        ucs_log_push_handler(capture_errors);
        ucs_status_t status = open(m_a, { { name, value } });
        ucs_log_pop_handler();
        errors = logged_errors;
        return status;
    }
};

TEST_F(settings, bad_values_are_refused_naming_the_variable)
{
    unsigned tried = 0;

    for (const bad_value &bad : bad_values) {
        for (const transport &t : transports) {
            if (!(bad.where & t.bit)) {
                continue;
            }
            const std::string var = std::string("UCX_") + t.prefix + bad.name;
            std::string errors;
            ucs_status_t status = open_with(t, bad.name, bad.value, errors);
            if (status == UCS_OK) {
                close(m_a);
            }
            EXPECT_EQ(UCS_ERR_INVALID_PARAM, status) << var << "=" << bad.value;
            /* the variable as the user types it, and no other first */
            size_t at = errors.find("UCX_");
            EXPECT_NE(std::string::npos, at) << var << "=" << bad.value;
            if (at != std::string::npos) {
                EXPECT_EQ(var, errors.substr(at, var.size()))
                    << var << "=" << bad.value << ": " << errors;
            }
            if (bad.range) {
                EXPECT_NE(std::string::npos, errors.find("out of range ["))
                    << var << "=" << bad.value << ": " << errors;
            }
            ++tried;
        }
    }
    EXPECT_GT(tried, 200u);
}

TEST_F(settings, edge_values_open)
{
    for (const good_value &good : good_values) {
        for (const transport &t : transports) {
            if (!(good.where & t.bit)) {
                continue;
            }
            std::string errors;
            ucs_status_t status = open_with(t, good.name, good.value, errors);
            EXPECT_EQ(UCS_OK, status) << t.tl << " " << good.name << "="
                                      << good.value << ": " << errors;
            if (status == UCS_OK) {
                close(m_a);
            }
        }
    }
}

TEST_F(settings, descriptions_give_the_ranges)
{
    /* what ucx_info -c prints: the settings with a range say it (spot
     * checks of each kind), and what their special values mean */
    struct expect {
        ucs_config_field_t *table;
        const char *name, *text;
    };
    for (const expect &e : std::vector<expect>{
             { uct_ud_sr_params_table, "RX_MAX_BUFS", "twice RX_BATCH" },
             { uct_ud_sr_params_table, "ZCOPY_CONTEXTS", "0: every get" },
             { uct_ud_sr_params_table, "TX_WINDOW_BYTES", "inf:" },
             { uct_ud_sr_params_table, "TIMER_TICK", "1us to 1s" },
             { uct_rc_params_table, "TX_BACKLOG", "4k to 1g" },
             { uct_rc_fp_iface_config_table, "SLOT_SIZE", "5 to 65539" },
             { uct_aptus_tl_iface_config_table, "IDLE", "0: never" },
             { uct_aptus_tl_iface_config_table, "REQUEST_TIMEOUT",
               "1ms to 1h" },
             { uct_aptus_tl_iface_config_table, "SEND_RULES",
               "{any ud_sr}" } }) {
        const ucs_config_field_t *field = e.table;
        while ((field->name != NULL) && strcmp(field->name, e.name)) {
            ++field;
        }
        ASSERT_NE(nullptr, field->name) << e.name;
        EXPECT_NE(nullptr, strstr(field->doc, e.text))
            << e.name << ": " << field->doc;
    }
}
