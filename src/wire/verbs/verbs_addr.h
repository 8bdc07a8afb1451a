/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the verbs wire's addresses.
 *
 * A UD queue pair is reached by its port (a LID on InfiniBand, a GID where
 * packets must carry a GRH: RoCE, or another subnet), its QP number and
 * the Q_Key it accepts. All of it is packed into the 20 bytes of an
 * aptus_wire_addr_t, unused bytes zero, so that addresses compare and hash
 * bytewise. A GID takes 16 bytes, leaving no room for the Q_Key: global
 * addresses use the wire's one Q_Key (APTUS_VERBS_QKEY).
 */
#ifndef APTUS_VERBS_ADDR_H_
#define APTUS_VERBS_ADDR_H_

#include "wire/wire.h"

#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The Q_Key of every UD QP of the wire: a datagram from anything else
 * (another program's QP that guesses a QP number) is dropped by the HCA. */
#define APTUS_VERBS_QKEY 0x1ee7a11u

#define APTUS_VERBS_ADDR_F_GLOBAL 1u /* routed by GID, with a GRH */

typedef struct aptus_verbs_addr {
    uint8_t flags;     /* APTUS_VERBS_ADDR_F_* */
    uint8_t qpn[3];    /* big-endian, 24 bits */
    uint8_t route[16]; /* F_GLOBAL: the GID; else the LID (2 bytes) then
                          the Q_Key (4), big-endian, and zeros */
} aptus_verbs_addr_t;

/* The address of QP qpn on a port known by its LID (gid NULL) or GID. */
void aptus_verbs_addr_pack(uint32_t qpn, uint16_t lid, uint32_t qkey,
                           const union ibv_gid *gid, aptus_wire_addr_t *addr);

uint32_t aptus_verbs_addr_qpn(const aptus_wire_addr_t *addr);
uint32_t aptus_verbs_addr_qkey(const aptus_wire_addr_t *addr);

/* What an address handle to it needs: the port number is ours. */
void aptus_verbs_addr_ah_attr(const aptus_wire_addr_t *addr, uint8_t port,
                              struct ibv_ah_attr *attr);

/* e.g. "lid 0x10 qpn 0x100" or "gid fe80::2:c9ff:fe00:1 qpn 0x100" */
const char *aptus_verbs_addr_str(const aptus_wire_addr_t *addr, char *buf,
                                 size_t max);

/* Same port, QP numbers aside. */
int aptus_verbs_addr_same_node(const aptus_wire_addr_t *a,
                               const aptus_wire_addr_t *b);

#ifdef __cplusplus
}
#endif

#endif
