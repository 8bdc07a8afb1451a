/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus tests: the part of librdmacm the broadcast's verbs wire uses
 * (bind to a local address, join and leave a multicast group, the event
 * channel), over the verbs double's devices (see ibv_double.h). The subnet
 * manager's join is a table lookup here: the group gets a multicast LID
 * derived from its address, the same for every member.
 */
#include "ibv_double_int.h"

#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DBL_CM_MAX_GROUPS 8

typedef struct dbl_cm_event {
    struct rdma_cm_event ev; /* first: the user's pointer is ours */
    struct dbl_cm_event *next;
} dbl_cm_event_t;

typedef struct dbl_cm_channel {
    struct rdma_event_channel ch;
    int wfd;
    dbl_cm_event_t *head, *tail; /* events not yet taken */
    unsigned ids, unacked;
} dbl_cm_channel_t;

typedef struct dbl_cm_id {
    struct rdma_cm_id id;
    int bound;
    uint32_t groups[DBL_CM_MAX_GROUPS]; /* joined, IPv4 network order */
    unsigned num_groups;
} dbl_cm_id_t;

static int dbl_cm_join_status;

void ibv_double_cm_join_error(int status)
{
    dbl_cm_join_status = status;
}

struct rdma_event_channel *rdma_create_event_channel(void)
{
    dbl_cm_channel_t *ch = dbl_alloc(sizeof(*ch));
    int fds[2];

    if (ch == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    if (pipe2(fds, O_CLOEXEC) < 0) {
        dbl_free(ch);
        return NULL;
    }
    ch->ch.fd = fds[0];
    ch->wfd   = fds[1];
    return &ch->ch;
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
    dbl_cm_channel_t *ch = (dbl_cm_channel_t *)channel;
    dbl_cm_event_t *e;

    /* librdmacm requires the ids gone and the events acked first; the
     * double leaves what is left alive, so that the leak check sees it */
    if ((ch->ids != 0) || (ch->unacked != 0)) {
        return;
    }
    while ((e = ch->head) != NULL) {
        ch->head = e->next;
        dbl_free(e);
    }
    close(ch->ch.fd);
    close(ch->wfd);
    dbl_free(ch);
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
                   void *context, enum rdma_port_space ps)
{
    dbl_cm_id_t *cid;

    if ((channel == NULL) || (ps != RDMA_PS_UDP)) {
        errno = EINVAL; /* the double knows UD port space only */
        return -1;
    }
    cid = dbl_alloc(sizeof(*cid));
    if (cid == NULL) {
        errno = ENOMEM;
        return -1;
    }
    cid->id.channel = channel;
    cid->id.context = context;
    cid->id.ps      = ps;
    cid->id.qp_type = IBV_QPT_UD;
    ((dbl_cm_channel_t *)channel)->ids++;
    *id = &cid->id;
    return 0;
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
    dbl_cm_id_t *cid = (dbl_cm_id_t *)id;
    struct ibv_device **list;
    dbl_dev_t *dev;
    int n;

    if (cid->bound || (addr->sa_family != AF_INET)) {
        errno = EINVAL;
        return -1;
    }
    dev = dbl_dev_by_ip(((struct sockaddr_in *)addr)->sin_addr.s_addr);
    if (dev == NULL) {
        errno = ENODEV; /* no RDMA device behind that address */
        return -1;
    }
    list = ibv_get_device_list(&n);
    if (list == NULL) {
        return -1;
    }
    id->verbs = ibv_open_device(list[dev->index]);
    ibv_free_device_list(list);
    if (id->verbs == NULL) {
        return -1;
    }
    id->port_num = 1;
    cid->bound   = 1;
    return 0;
}

/* The IPoIB mapping of an IPv4 group: ff12:401b:ffff::<group>. */
static void dbl_cm_mgid(uint32_t group, union ibv_gid *mgid)
{
    memset(mgid, 0, sizeof(*mgid));
    mgid->raw[0] = 0xff;
    mgid->raw[1] = 0x12;
    mgid->raw[2] = 0x40;
    mgid->raw[3] = 0x1b;
    mgid->raw[4] = 0xff;
    mgid->raw[5] = 0xff;
    memcpy(&mgid->raw[12], &group, sizeof(group));
}

static void dbl_cm_post(dbl_cm_channel_t *ch, dbl_cm_event_t *e)
{
    char one = 1;

    if (ch->tail != NULL) {
        ch->tail->next = e;
    } else {
        ch->head = e;
    }
    ch->tail = e;
    (void)!write(ch->wfd, &one, 1);
}

int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
                        void *context)
{
    dbl_cm_id_t *cid = (dbl_cm_id_t *)id;
    uint32_t group;
    dbl_cm_event_t *e;
    struct rdma_ud_param *ud;

    if (!cid->bound || (addr->sa_family != AF_INET) ||
        (cid->num_groups == DBL_CM_MAX_GROUPS)) {
        errno = EINVAL;
        return -1;
    }
    group = ((struct sockaddr_in *)addr)->sin_addr.s_addr;
    if (!IN_MULTICAST(ntohl(group))) {
        errno = EINVAL;
        return -1;
    }
    e = dbl_alloc(sizeof(*e));
    if (e == NULL) {
        errno = ENOMEM;
        return -1;
    }
    e->ev.id = id;
    if (dbl_cm_join_status != 0) {
        e->ev.event  = RDMA_CM_EVENT_MULTICAST_ERROR;
        e->ev.status = dbl_cm_join_status;
    } else {
        cid->groups[cid->num_groups++] = group;
        e->ev.event                    = RDMA_CM_EVENT_MULTICAST_JOIN;
        ud                             = &e->ev.param.ud;
        ud->private_data               = context;
        ud->ah_attr.dlid      = (uint16_t)(0xc000 + ntohl(group) % 0x3fff);
        ud->ah_attr.is_global = 1;
        ud->ah_attr.port_num  = 1;
        dbl_cm_mgid(group, &ud->ah_attr.grh.dgid);
        ud->ah_attr.grh.hop_limit = 1;
        ud->qp_num                = IBV_DOUBLE_MCAST_QPN;
        ud->qkey                  = RDMA_UDP_QKEY;
    }
    dbl_cm_post((dbl_cm_channel_t *)id->channel, e);
    return 0;
}

int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
    dbl_cm_id_t *cid = (dbl_cm_id_t *)id;
    uint32_t group   = ((struct sockaddr_in *)addr)->sin_addr.s_addr;
    unsigned i;

    for (i = 0; i < cid->num_groups; ++i) {
        if (cid->groups[i] == group) {
            cid->groups[i] = cid->groups[--cid->num_groups];
            return 0;
        }
    }
    errno = EADDRNOTAVAIL;
    return -1;
}

int rdma_get_cm_event(struct rdma_event_channel *channel,
                      struct rdma_cm_event **event)
{
    dbl_cm_channel_t *ch = (dbl_cm_channel_t *)channel;
    dbl_cm_event_t *e;
    char one;

    /* blocks, or EAGAIN where the user made the fd non-blocking */
    if (read(ch->ch.fd, &one, 1) != 1) {
        return -1;
    }
    e        = ch->head;
    ch->head = e->next;
    if (ch->head == NULL) {
        ch->tail = NULL;
    }
    ch->unacked++;
    *event = &e->ev;
    return 0;
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
    dbl_cm_event_t *e = (dbl_cm_event_t *)event;

    ((dbl_cm_channel_t *)event->id->channel)->unacked--;
    dbl_free(e);
    return 0;
}

int rdma_destroy_id(struct rdma_cm_id *id)
{
    dbl_cm_id_t *cid = (dbl_cm_id_t *)id;

    if (id->verbs != NULL) {
        (void)ibv_close_device(id->verbs);
    }
    ((dbl_cm_channel_t *)id->channel)->ids--;
    dbl_free(cid);
    return 0;
}

const char *rdma_event_str(enum rdma_cm_event_type event)
{
    switch (event) {
    case RDMA_CM_EVENT_MULTICAST_JOIN:
        return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR:
        return "RDMA_CM_EVENT_MULTICAST_ERROR";
    default:
        return "UNKNOWN EVENT";
    }
}
