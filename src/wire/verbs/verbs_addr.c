/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire's addresses (see verbs_addr.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "verbs_addr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

void aptus_verbs_addr_pack(uint32_t qpn, uint16_t lid, uint32_t qkey,
                           const union ibv_gid *gid, aptus_wire_addr_t *addr)
{
    aptus_verbs_addr_t *a = (aptus_verbs_addr_t *)addr->raw;

    memset(addr, 0, sizeof(*addr));
    a->qpn[0] = (uint8_t)(qpn >> 16);
    a->qpn[1] = (uint8_t)(qpn >> 8);
    a->qpn[2] = (uint8_t)qpn;
    if (gid != NULL) {
        a->flags = APTUS_VERBS_ADDR_F_GLOBAL;
        memcpy(a->route, gid->raw, sizeof(gid->raw));
        return;
    }
    a->route[0] = (uint8_t)(lid >> 8);
    a->route[1] = (uint8_t)lid;
    a->route[2] = (uint8_t)(qkey >> 24);
    a->route[3] = (uint8_t)(qkey >> 16);
    a->route[4] = (uint8_t)(qkey >> 8);
    a->route[5] = (uint8_t)qkey;
}

uint32_t aptus_verbs_addr_qpn(const aptus_wire_addr_t *addr)
{
    const aptus_verbs_addr_t *a = (const aptus_verbs_addr_t *)addr->raw;

    return ((uint32_t)a->qpn[0] << 16) | ((uint32_t)a->qpn[1] << 8) | a->qpn[2];
}

uint32_t aptus_verbs_addr_qkey(const aptus_wire_addr_t *addr)
{
    const aptus_verbs_addr_t *a = (const aptus_verbs_addr_t *)addr->raw;

    if (a->flags & APTUS_VERBS_ADDR_F_GLOBAL) {
        return APTUS_VERBS_QKEY;
    }
    return ((uint32_t)a->route[2] << 24) | ((uint32_t)a->route[3] << 16) |
           ((uint32_t)a->route[4] << 8) | a->route[5];
}

void aptus_verbs_addr_ah_attr(const aptus_wire_addr_t *addr, uint8_t port,
                              struct ibv_ah_attr *attr)
{
    const aptus_verbs_addr_t *a = (const aptus_verbs_addr_t *)addr->raw;

    memset(attr, 0, sizeof(*attr));
    attr->port_num = port;
    if (a->flags & APTUS_VERBS_ADDR_F_GLOBAL) {
        attr->is_global      = 1;
        attr->grh.hop_limit  = 64;
        attr->grh.sgid_index = 0;
        memcpy(attr->grh.dgid.raw, a->route, sizeof(attr->grh.dgid.raw));
    } else {
        attr->dlid = (uint16_t)((a->route[0] << 8) | a->route[1]);
    }
}

const char *aptus_verbs_addr_str(const aptus_wire_addr_t *addr, char *buf,
                                 size_t max)
{
    const aptus_verbs_addr_t *a = (const aptus_verbs_addr_t *)addr->raw;
    char gid[INET6_ADDRSTRLEN];

    if (a->flags & APTUS_VERBS_ADDR_F_GLOBAL) {
        if (inet_ntop(AF_INET6, a->route, gid, sizeof(gid)) == NULL) {
            snprintf(gid, sizeof(gid), "?");
        }
        snprintf(buf, max, "gid %s qpn 0x%x", gid, aptus_verbs_addr_qpn(addr));
    } else {
        snprintf(buf, max, "lid 0x%x qpn 0x%x",
                 (a->route[0] << 8) | a->route[1], aptus_verbs_addr_qpn(addr));
    }
    return buf;
}

int aptus_verbs_addr_same_node(const aptus_wire_addr_t *a,
                               const aptus_wire_addr_t *b)
{
    const aptus_verbs_addr_t *x = (const aptus_verbs_addr_t *)a->raw;
    const aptus_verbs_addr_t *y = (const aptus_verbs_addr_t *)b->raw;
    size_t len = (x->flags & APTUS_VERBS_ADDR_F_GLOBAL) ? 16 : 2;

    return (x->flags == y->flags) && !memcmp(x->route, y->route, len);
}
