/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: what every transport's interface does alike.
 */
#ifndef UCT_APTUS_IFACE_H_
#define UCT_APTUS_IFACE_H_

#include <uct/api/uct.h>
#include <uct/base/uct_iface.h>
#include <ucs/async/async.h>
#include <ucs/datastruct/array.h>
#include <ucs/sys/string.h>

#include <limits.h>
#include <stdint.h>

#include "proto/fp_ring.h"
#include "wire/conn.h"

/*
 * The alignment of received active messages the user asks for
 * (UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT / _AM_ALIGN_OFFSET): data + offset
 * aligned to alignment. Without them alignment is 1 and offset 0. A value
 * that cannot be honoured is refused with a message naming tl_name, never
 * ignored: UCS_ERR_INVALID_PARAM.
 */
ucs_status_t uct_aptus_iface_am_alignment(const char *tl_name,
                                          const uct_iface_params_t *params,
                                          size_t *alignment_p,
                                          size_t *offset_p);

/*
 * uct_iface_estimate_perf of a transport whose active messages are copied
 * (copy_bw) while its bandwidth is that of its zero-copy get: AM_ZCOPY is
 * charged the copies (see the function); everything else is the base's.
 */
ucs_status_t uct_aptus_iface_estimate_perf(uct_iface_h tl_iface,
                                           uct_perf_attr_t *perf_attr,
                                           double copy_bw);

/*
 * A transport whose async timer runs the channels' timers (ud_sr, aptus):
 * those allocate memory and take locks, which a signal handler must not,
 * so UCX_ASYNC_MODE=signal is refused with one line naming the setting
 * (UCS_ERR_UNSUPPORTED: UCP goes on with the other transports).
 */
ucs_status_t uct_aptus_iface_async_check(const char *tl_name,
                                         const ucs_async_context_t *async);

/*
 * Every setting has a range (DESIGN.md), checked at interface open: a
 * value outside it is refused with one line naming the variable as the
 * user types it (UCX_<prefix><name>), the value and the range, and the
 * check fails (0; the caller returns UCS_ERR_INVALID_PARAM). Counts and
 * byte sizes: UINT64_MAX prints as inf (a memunits inf, or an unsigned
 * -1 / inf once widened by uct_aptus_uint). Times are in seconds; the
 * comparison is written so that NaN fails too.
 */
typedef struct uct_aptus_range {
    const char *name; /* after the transport's prefix */
    uint64_t value;
    uint64_t min;
    uint64_t max;
} uct_aptus_range_t;

typedef struct uct_aptus_time_range {
    const char *name;
    double value;
    double min;
    double max;
} uct_aptus_time_range_t;

int uct_aptus_ranges_check(const char *tl_name, const char *prefix,
                           const uct_aptus_range_t *ranges, unsigned count);

int uct_aptus_time_ranges_check(const char *tl_name, const char *prefix,
                                const uct_aptus_time_range_t *ranges,
                                unsigned count);

/* An unsigned setting widened for a range: UINT_MAX (what UCS reads for
 * inf and for -1) becomes UINT64_MAX, so the error says inf. */
static inline uint64_t uct_aptus_uint(unsigned value)
{
    return (value == UINT_MAX) ? UINT64_MAX : value;
}

/* A memunits setting widened for a range (inf, and -1, are SIZE_MAX). */
static inline uint64_t uct_aptus_bytes(size_t value)
{
    return (value == UCS_MEMUNITS_INF) ? UINT64_MAX : value;
}

/*
 * The settings every interface takes from UCT's own table: an empty
 * UCX_<prefix>ALLOC left every buffer allocation failing later with only
 * "Out of memory", and MAX_NUM_EPS=0 allows no endpoint.
 */
int uct_aptus_iface_config_check(const char *tl_name, const char *prefix,
                                 const uct_iface_config_t *config);

/*
 * A periodic async timer on a timerfd. UCX's own timers make its async
 * thread wait in whole milliseconds and then poll, without sleeping,
 * through the last partial millisecond of a period (epoll_wait with a zero
 * timeout, thousands of calls): up to a tenth of a core at a 10 ms period,
 * in every process, which ranks sharing cores pay in time. The timerfd's
 * readiness wakes the thread when the period is over, and it sleeps
 * between. Edge-triggered: an expiration the handler has not consumed yet
 * (the user held the lock) does not wake the thread again and again.
 *
 * Its period adapts between base_us and max_us: each wake-up takes a core
 * from a rank that shares it, which pays for it in time (LAMMPS at 16
 * ranks on 2 cores, 16 processes waking every 10 ms: 5% of the loop time),
 * while an application that calls progress needs none. The owner doubles
 * the period while the application progresses and resets it when it is
 * away (uct_aptus_ud_async_timer).
 */
typedef struct uct_aptus_async_timer {
    int fd;
    uint64_t base_us;
    uint64_t max_us;
    uint64_t period_us; /* now */
    uint64_t wakeups;   /* expirations handled (statistics) */
} uct_aptus_async_timer_t;

ucs_status_t uct_aptus_async_timer_start(uct_aptus_async_timer_t *timer,
                                         ucs_async_context_t *async,
                                         uint64_t base_us, uint64_t max_us,
                                         ucs_async_event_cb_t cb, void *arg);

/* The next period: double (the application progresses), or the base. */
void uct_aptus_async_timer_backoff(uct_aptus_async_timer_t *timer);
void uct_aptus_async_timer_reset(uct_aptus_async_timer_t *timer);

/* From the callback: consume the expirations, return their number. */
uint64_t uct_aptus_async_timer_expired(uct_aptus_async_timer_t *timer);

void uct_aptus_async_timer_stop(uct_aptus_async_timer_t *timer);

/*
 * The datagram socket's readiness as an async event, for a transport
 * whose async timer covers for an application that computes (ud_sr,
 * aptus). Disarmed while the user progresses (no thread wakes per
 * datagram then); the timer arms it once the user has been away for a
 * timer period, and from then on a datagram is received, acknowledged,
 * and a zero-copy request served, within microseconds of its arrival
 * rather than at the next tick. Edge-triggered: one wake-up per burst.
 */
typedef struct uct_aptus_async_rx {
    int fd; /* -1: the wire has none (the timer alone covers) */
    int armed;
    volatile int user_waiting; /* the user waits for the async lock: the
                                  async thread stops at the next batch */
    uint64_t arms;             /* times the user went away */
    uint64_t events;           /* wake-ups that found the user away */
} uct_aptus_async_rx_t;

void uct_aptus_async_rx_init(uct_aptus_async_rx_t *rx, const char *tl_name,
                             ucs_async_context_t *async, int fd,
                             ucs_async_event_cb_t cb, void *arg);
void uct_aptus_async_rx_cleanup(uct_aptus_async_rx_t *rx);

static inline void uct_aptus_async_rx_arm(uct_aptus_async_rx_t *rx, int on)
{
    if ((rx->fd >= 0) && (rx->armed != on)) {
        rx->armed = on;
        rx->arms += on;
        (void)ucs_async_modify_handler(
            rx->fd,
            on ? (UCS_EVENT_SET_EVREAD | UCS_EVENT_SET_EDGE_TRIGGERED) : 0);
    }
}

/* The user's progress takes the async lock. The async thread may hold it
 * while it receives and streams a get's data: it sees user_waiting and
 * stops at its next batch (the user's progress goes on from there), so
 * the user does not spin on a core the two need for as long as a stream
 * takes. */
#define UCT_APTUS_ASYNC_ENTER(_rx, _async)                                     \
    do {                                                                       \
        (_rx)->user_waiting = 1;                                               \
        UCS_ASYNC_BLOCK(_async);                                               \
        (_rx)->user_waiting = 0;                                               \
    } while (0)

/* Progress calls closer together than this: the user polls, and an armed
 * async thread would only contend for the core and the lock. */
#define UCT_APTUS_ASYNC_POLL_GAP_US 100

/* The user's progress call, the previous one at prev_us. rx is disarmed:
 * from now on the async timer covers for a user who goes away. Except
 * where peers read this side's memory (serving) and the calls are far
 * apart (the user computes between them, or waits on something else, as
 * ucx_perftest's passive side does in a 1 ms poll loop): a peer's request
 * for a get would wait for the next call, so datagrams wake the async
 * thread. Ranks that share cores and yield between calls are not woken
 * for every datagram of their eager traffic. */
static inline void uct_aptus_async_rx_progress(uct_aptus_async_rx_t *rx,
                                               uint64_t prev_us,
                                               uint64_t now_us, int serving)
{
    uct_aptus_async_rx_arm(
        rx, serving && ((now_us - prev_us) >= UCT_APTUS_ASYNC_POLL_GAP_US));
}

/*
 * The devices of a transport: its wire's devices on the memory domain of
 * its kind (one_sided: "aptus_rc" or "aptus_verbs_rc", else "aptus" or
 * "aptus_verbs"), none on the other; none either for a transport that
 * carries one-sided operations over connections (conns) on a domain whose
 * keys its wire's connections do not take (uct_aptus_md_conn_keys).
 */
ucs_status_t uct_aptus_iface_query_devices(uct_md_h md, int one_sided,
                                           int conns,
                                           uct_tl_device_resource_t **devices_p,
                                           unsigned *num_devices_p);

/*
 * Peer failures found where the user's error handler must not run (the
 * async thread, inside a channel's call): queued, and handed to the
 * handler from progress, in the user's thread.
 */
typedef struct uct_aptus_failure {
    uct_ep_h ep;
    ucs_status_t status;
    char peer[128]; /* who, for a failure nobody handles */
} uct_aptus_failure_t;

UCS_ARRAY_DECLARE_TYPE(uct_aptus_failures, unsigned, uct_aptus_failure_t);
typedef ucs_array_t(uct_aptus_failures) uct_aptus_failures_t;

static inline int
uct_aptus_failures_pending(const uct_aptus_failures_t *failures)
{
    return !ucs_array_is_empty(failures);
}

void uct_aptus_failures_init(uct_aptus_failures_t *failures);
void uct_aptus_failures_cleanup(uct_aptus_failures_t *failures);

/* Queue a report; peer names the other end for the log. 0 when there is
 * no memory for it (said in the log). */
int uct_aptus_failures_add(uct_aptus_failures_t *failures, const char *tl_name,
                           uct_ep_h ep, ucs_status_t status, const char *peer);

/* The endpoint goes away: its queued reports with it. */
void uct_aptus_failures_forget(uct_aptus_failures_t *failures, uct_ep_h ep);

/* A get_bcopy whose bytes arrive later: they land in data, and when comp
 * completes they are unpacked (on success), the user's completion runs
 * and the object is freed. The caller frees it itself if the operation
 * did not start (anything but UCS_INPROGRESS). */
typedef struct uct_aptus_bcopy_get {
    uct_completion_t comp;
    uct_unpack_callback_t unpack_cb;
    void *arg;
    uct_completion_t *user_comp;
    size_t length;
    uint8_t data[];
} uct_aptus_bcopy_get_t;

uct_aptus_bcopy_get_t *uct_aptus_bcopy_get_new(uct_unpack_callback_t unpack_cb,
                                               void *arg, size_t length,
                                               uct_completion_t *user_comp);

/* A flush that must be asked again: run the async handlers the async
 * thread found the context busy for (a timer event missed while this
 * thread held the lock). Its edge-triggered timerfd then fires again; a
 * caller that polls the flush without progress would otherwise wait on a
 * timer that never comes back. */
static inline ucs_status_t uct_aptus_flush_return(ucs_async_context_t *async,
                                                  ucs_status_t status)
{
    if (status == UCS_INPROGRESS) {
        ucs_async_check_miss(async);
    }
    return status;
}

/* Hand every queued report to iface's error handler. A timeout nobody
 * handles ends the process with the transport, device and peer named, as
 * UCX's ud does: ranks that wait for a dead peer would wait for ever, and
 * the launcher ends a job whose process died. Other unhandled failures
 * (a peer that closed or reset its side) are logged. */
void uct_aptus_failures_report(uct_aptus_failures_t *failures,
                               uct_iface_h iface, const char *tl_name,
                               const char *dev_name);

#endif
