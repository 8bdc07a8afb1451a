/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: what every transport's interface does alike.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "aptus_iface.h"
#include "aptus_md.h"
#include "channel/ud_zcopy.h"

#include <ucs/sys/string.h>
#include <ucs/sys/math.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/datastruct/array.inl>
#include <uct/base/uct_iface.h>
#include <ucs/async/async.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/timerfd.h>
#include <unistd.h>

ucs_status_t uct_aptus_iface_am_alignment(const char *tl_name,
                                          const uct_iface_params_t *params,
                                          size_t *alignment_p, size_t *offset_p)
{
    uint64_t mask    = params->field_mask;
    size_t alignment = 1, offset = 0;

    if (mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT) {
        alignment = params->am_alignment;
        if (!ucs_is_pow2(alignment)) { /* 0 is not one either */
            ucs_error("%s: am_alignment %zu is not a power of 2", tl_name,
                      alignment);
            return UCS_ERR_INVALID_PARAM;
        }
    }
    if (mask & UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET) {
        if (!(mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT)) {
            ucs_error("%s: am_align_offset is given without am_alignment",
                      tl_name);
            return UCS_ERR_INVALID_PARAM;
        }
        /* UCP passes its own header length as the offset, which may exceed
         * the alignment; only its remainder moves the aligned position */
        offset = params->am_align_offset & (alignment - 1);
    }
    *alignment_p = alignment;
    *offset_p    = offset;
    return UCS_OK;
}

ucs_status_t uct_aptus_iface_estimate_perf(uct_iface_h tl_iface,
                                           uct_perf_attr_t *perf_attr,
                                           double copy_bw)
{
    uct_iface_attr_t attr;
    ucs_status_t status;
    double bw, extra;

    status = uct_base_iface_estimate_perf(tl_iface, perf_attr);
    if ((status != UCS_OK) ||
        !(perf_attr->field_mask & UCT_PERF_ATTR_FIELD_OPERATION) ||
        (perf_attr->operation != UCT_EP_OP_AM_ZCOPY)) {
        return status;
    }
    status = uct_iface_query(tl_iface, &attr);
    if (status != UCS_OK) {
        return status;
    }
    bw = attr.bandwidth.dedicated + attr.bandwidth.shared;
    if ((copy_bw <= 0) || (copy_bw >= bw)) {
        return UCS_OK;
    }
    /* Active messages copy on both sides, one system call per datagram,
     * while the interface's bandwidth is that of the zero-copy get that
     * serves the rendezvous. UCP (protocols v1) reads the send overheads
     * of AM_ZCOPY as the cost of each max_bcopy fragment of an eager
     * message: so it is where the copies' cost goes, and the rendezvous
     * wins above the size where it pays, as it does on the wire. */
    extra = attr.cap.am.max_bcopy * (1.0 / copy_bw - 1.0 / bw);
    if (perf_attr->field_mask & UCT_PERF_ATTR_FIELD_SEND_PRE_OVERHEAD) {
        perf_attr->send_pre_overhead += extra;
    }
    if (perf_attr->field_mask & UCT_PERF_ATTR_FIELD_BANDWIDTH) {
        perf_attr->bandwidth.dedicated = 0;
        perf_attr->bandwidth.shared    = copy_bw;
    }
    return UCS_OK;
}

static int uct_aptus_async_timer_set(uct_aptus_async_timer_t *timer,
                                     uint64_t period_us)
{
    uint64_t ns = ucs_max(period_us, 1) * UCS_NSEC_PER_USEC;
    struct itimerspec its;

    its.it_interval.tv_sec  = ns / UCS_NSEC_PER_SEC;
    its.it_interval.tv_nsec = ns % UCS_NSEC_PER_SEC;
    its.it_value            = its.it_interval;
    if (timerfd_settime(timer->fd, 0, &its, NULL) != 0) {
        return -1;
    }
    timer->period_us = period_us;
    return 0;
}

void uct_aptus_async_timer_backoff(uct_aptus_async_timer_t *timer)
{
    ++timer->wakeups;
    if (timer->period_us < timer->max_us) {
        /* a failure keeps the shorter period: more wake-ups, no harm */
        (void)uct_aptus_async_timer_set(
            timer, ucs_min(timer->period_us * 2, timer->max_us));
    }
}

void uct_aptus_async_timer_reset(uct_aptus_async_timer_t *timer)
{
    ++timer->wakeups;
    if (timer->period_us != timer->base_us) {
        (void)uct_aptus_async_timer_set(timer, timer->base_us);
    }
}

ucs_status_t uct_aptus_async_timer_start(uct_aptus_async_timer_t *timer,
                                         ucs_async_context_t *async,
                                         uint64_t base_us, uint64_t max_us,
                                         ucs_async_event_cb_t cb, void *arg)
{
    ucs_status_t status;

    timer->base_us = ucs_max(base_us, 1);
    timer->max_us  = ucs_max(max_us, timer->base_us);
    timer->wakeups = 0;
    timer->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (timer->fd < 0) {
        ucs_error("cannot create a timerfd: %m");
        return UCS_ERR_IO_ERROR;
    }
    if (uct_aptus_async_timer_set(timer, timer->base_us) != 0) {
        ucs_error("cannot start a timerfd: %m");
        status = UCS_ERR_IO_ERROR;
        goto err_close;
    }
    /* Level-triggered: an edge-triggered timerfd that is not read fires
     * once and never again, and an expiration the async thread finds the
     * context busy for is not read (UCX queues it as missed until the
     * user's progress polls the queue). A user that then computes, or
     * polls without progress, would lose the timer for good: no ACK, no
     * retransmission, no handshake answered. Level-triggered, the thread
     * comes back until the handler runs and reads it. */
    status = ucs_async_set_event_handler(async->mode, timer->fd,
                                         UCS_EVENT_SET_EVREAD, cb, arg, async);
    if (status != UCS_OK) {
        goto err_close;
    }
    return UCS_OK;

err_close:
    close(timer->fd);
    timer->fd = -1;
    return status;
}

uint64_t uct_aptus_async_timer_expired(uct_aptus_async_timer_t *timer)
{
    uint64_t n;

    return (read(timer->fd, &n, sizeof(n)) == sizeof(n)) ? n : 0;
}

void uct_aptus_async_timer_stop(uct_aptus_async_timer_t *timer)
{
    if (timer->fd >= 0) {
        ucs_async_remove_handler(timer->fd, 1);
        close(timer->fd);
        timer->fd = -1;
    }
}

void uct_aptus_async_rx_init(uct_aptus_async_rx_t *rx, const char *tl_name,
                             ucs_async_context_t *async, int fd,
                             ucs_async_event_cb_t cb, void *arg)
{
    ucs_status_t status;

    rx->fd           = -1;
    rx->armed        = 0;
    rx->arms         = 0;
    rx->events       = 0;
    rx->user_waiting = 0;
    if (fd < 0) {
        return;
    }
    status = ucs_async_set_event_handler(async->mode, fd, 0, cb, arg, async);
    if (status != UCS_OK) {
        /* the timer still covers, at its period */
        ucs_debug("%s: no async handler on fd %d (%s): the timer covers",
                  tl_name, fd, ucs_status_string(status));
        return;
    }
    rx->fd = fd;
}

void uct_aptus_async_rx_cleanup(uct_aptus_async_rx_t *rx)
{
    if (rx->fd >= 0) {
        ucs_async_remove_handler(rx->fd, 1);
        rx->fd = -1;
    }
}

ucs_status_t uct_aptus_iface_async_check(const char *tl_name,
                                         const ucs_async_context_t *async)
{
    if (async->mode == UCS_ASYNC_MODE_SIGNAL) {
        ucs_error("%s: UCX_ASYNC_MODE=signal is not supported: its timers "
                  "allocate memory, which a signal handler must not; use "
                  "UCX_ASYNC_MODE=thread_spinlock or thread_mutex",
                  tl_name);
        return UCS_ERR_UNSUPPORTED;
    }
    return UCS_OK;
}

static const char *uct_aptus_range_str(uint64_t value, char *buf, size_t max)
{
    if (value == UINT64_MAX) {
        return "inf";
    }
    snprintf(buf, max, "%" PRIu64, value);
    return buf;
}

int uct_aptus_ranges_check(const char *tl_name, const char *prefix,
                           const uct_aptus_range_t *ranges, unsigned count)
{
    char value[24], min[24], max[24];
    unsigned i;

    for (i = 0; i < count; ++i) {
        if ((ranges[i].value >= ranges[i].min) &&
            (ranges[i].value <= ranges[i].max)) {
            continue;
        }
        ucs_error("%s: invalid configuration: UCX_%s%s=%s is out of range "
                  "[%s, %s]",
                  tl_name, prefix, ranges[i].name,
                  uct_aptus_range_str(ranges[i].value, value, sizeof(value)),
                  uct_aptus_range_str(ranges[i].min, min, sizeof(min)),
                  uct_aptus_range_str(ranges[i].max, max, sizeof(max)));
        return 0;
    }
    return 1;
}

int uct_aptus_time_ranges_check(const char *tl_name, const char *prefix,
                                const uct_aptus_time_range_t *ranges,
                                unsigned count)
{
    unsigned i;

    for (i = 0; i < count; ++i) {
        if ((ranges[i].value >= ranges[i].min) &&
            (ranges[i].value <= ranges[i].max)) {
            continue;
        }
        ucs_error("%s: invalid configuration: UCX_%s%s=%gs is out of range "
                  "[%gs, %gs]",
                  tl_name, prefix, ranges[i].name, ranges[i].value,
                  ranges[i].min, ranges[i].max);
        return 0;
    }
    return 1;
}

int uct_aptus_iface_config_check(const char *tl_name, const char *prefix,
                                 const uct_iface_config_t *config)
{
    if (config->alloc_methods.count == 0) {
        ucs_error("%s: invalid configuration: UCX_%sALLOC is empty: name at "
                  "least one of huge, thp, md, mmap, heap",
                  tl_name, prefix);
        return 0;
    }
    if (config->max_num_eps == 0) {
        ucs_error("%s: invalid configuration: UCX_%sMAX_NUM_EPS=0 is out of "
                  "range [1, inf]",
                  tl_name, prefix);
        return 0;
    }
    return 1;
}

static void uct_aptus_bcopy_get_done(uct_completion_t *self)
{
    uct_aptus_bcopy_get_t *get =
        ucs_container_of(self, uct_aptus_bcopy_get_t, comp);

    if (self->status == UCS_OK) {
        get->unpack_cb(get->arg, get->data, get->length);
    }
    if (get->user_comp != NULL) {
        uct_invoke_completion(get->user_comp, self->status);
    }
    ucs_free(get);
}

uct_aptus_bcopy_get_t *uct_aptus_bcopy_get_new(uct_unpack_callback_t unpack_cb,
                                               void *arg, size_t length,
                                               uct_completion_t *user_comp)
{
    uct_aptus_bcopy_get_t *get =
        ucs_malloc(sizeof(*get) + length, "uct_aptus_bcopy_get");

    if (get != NULL) {
        get->comp.func   = uct_aptus_bcopy_get_done;
        get->comp.count  = 1;
        get->comp.status = UCS_OK;
        get->unpack_cb   = unpack_cb;
        get->arg         = arg;
        get->user_comp   = user_comp;
        get->length      = length;
    }
    return get;
}

UCS_ARRAY_IMPL(uct_aptus_failures, unsigned, uct_aptus_failure_t,
               static UCS_F_ALWAYS_INLINE);

void uct_aptus_failures_init(uct_aptus_failures_t *failures)
{
    ucs_array_init_dynamic(failures);
}

void uct_aptus_failures_cleanup(uct_aptus_failures_t *failures)
{
    ucs_array_cleanup_dynamic(failures);
    ucs_array_init_dynamic(failures);
}

int uct_aptus_failures_add(uct_aptus_failures_t *failures, const char *tl_name,
                           uct_ep_h ep, ucs_status_t status, const char *peer)
{
    uct_aptus_failure_t *item;

    if (ucs_array_append(uct_aptus_failures, failures) != UCS_OK) {
        ucs_error("%s: cannot queue a peer failure report", tl_name);
        return 0;
    }
    item         = ucs_array_last(failures);
    item->ep     = ep;
    item->status = status;
    ucs_strncpy_zero(item->peer, peer, sizeof(item->peer));
    return 1;
}

void uct_aptus_failures_forget(uct_aptus_failures_t *failures, uct_ep_h ep)
{
    unsigned i = 0;

    while (i < ucs_array_length(failures)) {
        if (ucs_array_elem(failures, i).ep == ep) {
            ucs_array_elem(failures, i) = *ucs_array_last(failures);
            ucs_array_set_length(failures, ucs_array_length(failures) - 1);
        } else {
            ++i;
        }
    }
}

void uct_aptus_failures_report(uct_aptus_failures_t *failures,
                               uct_iface_h iface, const char *tl_name,
                               const char *dev_name)
{
    uct_aptus_failure_t failure;

    /* the handler may destroy endpoints, and so forget reports: take one
     * at a time */
    while (!ucs_array_is_empty(failures)) {
        failure = *ucs_array_last(failures);
        ucs_array_set_length(failures, ucs_array_length(failures) - 1);
        if (uct_iface_handle_ep_err(iface, failure.ep, failure.status) ==
            UCS_OK) {
            continue;
        }
        if (failure.status == UCS_ERR_ENDPOINT_TIMEOUT) {
            ucs_fatal("%s/%s: endpoint %p to %s: unhandled timeout error (the "
                      "peer failed or stopped answering; without an error "
                      "handler nothing could go on)",
                      tl_name, dev_name, failure.ep, failure.peer);
        }
        ucs_error("%s/%s: endpoint %p to %s: unhandled peer failure: %s",
                  tl_name, dev_name, failure.ep, failure.peer,
                  ucs_status_string(failure.status));
    }
}

ucs_status_t uct_aptus_iface_query_devices(uct_md_h md, int one_sided,
                                           int conns,
                                           uct_tl_device_resource_t **devices_p,
                                           unsigned *num_devices_p)
{
    if ((!uct_aptus_md_is_one_sided(md) != !one_sided) ||
        (conns && !uct_aptus_md_conn_keys(md))) {
        *devices_p     = NULL;
        *num_devices_p = 0;
        return UCS_OK;
    }
    return uct_aptus_md_wire(md)->query_devices(devices_p, num_devices_p);
}
