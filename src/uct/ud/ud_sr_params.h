/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the settings of a UD-SR channel with UD-ZCopy and its datagram
 * wire, shared by the transports that carry one (ud_sr, aptus): one
 * configuration table embedded under each transport's prefix, and one
 * translation into the channel's, the wire's and UD-ZCopy's configuration.
 */
#ifndef UCT_UD_SR_PARAMS_H_
#define UCT_UD_SR_PARAMS_H_

#include "channel/ud_sr_chan.h"
#include "channel/ud_zcopy.h"
#include "wire/wire_dev.h"

#include <ucs/config/parser.h>

#define UCT_UD_SR_MAX_AM_HDR 256

typedef struct uct_ud_sr_params {
    size_t mtu;
    size_t seg_size;
    size_t max_am_hdr;
    unsigned tx_window;
    size_t tx_window_bytes;
    size_t tx_max_bytes;
    unsigned rx_queue_len;
    unsigned rx_max_bufs;
    unsigned rx_max_poll;
    unsigned rx_batch;
    unsigned ack_count;
    unsigned max_peers;
    unsigned rx_max_reasm;
    double timer_tick;
    double async_interval;
    double async_interval_max;
    double probe_min;
    double rto_min;
    double rto_max;
    double rto_init;
    double timeout;
    int crc;
    int sock_buf_force;
    double fault_drop;
    double fault_dup;
    double fault_reorder;
    double fault_delay;
    double fault_delay_time;
    unsigned long fault_seed;
    int zcopy;
    size_t zcopy_thresh;
    unsigned zcopy_contexts;
    unsigned zcopy_window;
    size_t zcopy_max;
    unsigned zcopy_max_served;
} uct_ud_sr_params_t;

extern ucs_config_field_t uct_ud_sr_params_table[];

/* What a transport opens from the settings. */
typedef struct uct_ud_sr_setup {
    aptus_dgram_wire_config_t wire;
    aptus_ud_chan_config_t chan;
    aptus_udz_config_t udz;
    uint64_t async_interval_us;
    uint64_t async_max_us; /* at least async_interval_us */
} uct_ud_sr_setup_t;

/* Translate and check the settings. A bad one is refused with an error
 * that names the variable (UCX_<prefix><NAME>) and tl_name. */
ucs_status_t uct_ud_sr_params_setup(const uct_ud_sr_params_t *params,
                                    const char *tl_name, const char *prefix,
                                    const aptus_wire_dev_ops_t *wdev,
                                    const uct_iface_params_t *iface_params,
                                    size_t peer_headroom,
                                    uct_ud_sr_setup_t *setup);

uint32_t uct_ud_sr_usec(double seconds);

uint64_t uct_ud_sr_clock(void);

/* A random non-zero interface key from the OS CSPRNG. */
uint64_t uct_ud_sr_random_key(void);

#endif
