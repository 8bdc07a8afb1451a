/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the HCAs this process has open (see verbs_hca.h).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "wire/verbs/verbs_hca.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/string.h>

#include <endian.h>
#include <pthread.h>
#include <string.h>

/* Tag of a fabric id, so that it never equals a host id of the sock wire. */
#define APTUS_VERBS_FABRIC_TAG 0x7662000000000000ull

static pthread_mutex_t aptus_verbs_hcas_lock = PTHREAD_MUTEX_INITIALIZER;
static UCS_LIST_HEAD(aptus_verbs_hcas);

static struct ibv_context *aptus_verbs_hca_open(const char *hca_name)
{
    struct ibv_context *ctx = NULL;
    struct ibv_device **list;
    int i, num = 0;

    list = ibv_get_device_list(&num);
    if (list == NULL) {
        ucs_debug("verbs wire: ibv_get_device_list failed: %m");
        return NULL;
    }
    for (i = 0; i < num; ++i) {
        if (!strcmp(ibv_get_device_name(list[i]), hca_name)) {
            ctx = ibv_open_device(list[i]);
            break;
        }
    }
    ibv_free_device_list(list);
    return ctx;
}

ucs_status_t aptus_verbs_hca_get(const char *hca_name,
                                 aptus_verbs_hca_t **hca_p)
{
    ucs_status_t status = UCS_OK;
    aptus_verbs_hca_t *hca;

    if (strlen(hca_name) >= sizeof(hca->name)) {
        return UCS_ERR_NO_DEVICE;
    }
    pthread_mutex_lock(&aptus_verbs_hcas_lock);
    ucs_list_for_each(hca, &aptus_verbs_hcas, list)
    {
        if (!strcmp(hca->name, hca_name)) {
            ++hca->refs;
            goto out;
        }
    }

    hca = ucs_calloc(1, sizeof(*hca), "aptus_verbs_hca");
    if (hca == NULL) {
        status = UCS_ERR_NO_MEMORY;
        goto out;
    }
    ucs_strncpy_zero(hca->name, hca_name, sizeof(hca->name));
    hca->ctx = aptus_verbs_hca_open(hca_name);
    if (hca->ctx == NULL) {
        ucs_debug("verbs wire: no device %s", hca_name);
        status = UCS_ERR_NO_DEVICE;
        goto err_free;
    }
    hca->pd = ibv_alloc_pd(hca->ctx);
    if (hca->pd == NULL) {
        ucs_error("verbs wire: ibv_alloc_pd on %s failed: %m", hca_name);
        status = UCS_ERR_IO_ERROR;
        goto err_close;
    }
    hca->refs = 1;
    ucs_list_add_tail(&aptus_verbs_hcas, &hca->list);
    goto out;

err_close:
    ibv_close_device(hca->ctx);
err_free:
    ucs_free(hca);
    hca = NULL;
out:
    pthread_mutex_unlock(&aptus_verbs_hcas_lock);
    *hca_p = hca;
    return status;
}

void aptus_verbs_hca_put(aptus_verbs_hca_t *hca)
{
    pthread_mutex_lock(&aptus_verbs_hcas_lock);
    if (--hca->refs > 0) {
        pthread_mutex_unlock(&aptus_verbs_hcas_lock);
        return;
    }
    ucs_list_del(&hca->list);
    pthread_mutex_unlock(&aptus_verbs_hcas_lock);

    /* a PD in use (a QP or MR left behind) fails: said, not hidden */
    if (ibv_dealloc_pd(hca->pd)) {
        ucs_warn("verbs wire: ibv_dealloc_pd on %s failed", hca->name);
    }
    if (ibv_close_device(hca->ctx)) {
        ucs_warn("verbs wire: ibv_close_device %s failed", hca->name);
    }
    ucs_free(hca);
}

uint64_t aptus_verbs_fabric_id(const union ibv_gid *gid)
{
    return APTUS_VERBS_FABRIC_TAG ^
           (be64toh(gid->global.subnet_prefix) & 0x0000ffffffffffffull);
}

struct ibv_mr *aptus_verbs_hca_reg(aptus_verbs_hca_t *hca, void *address,
                                   size_t length, uint16_t lid,
                                   uint64_t *token_p)
{
    struct ibv_mr *mr;

    mr = ibv_reg_mr(hca->pd, address, length,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                        IBV_ACCESS_REMOTE_READ);
    if (mr == NULL) {
        ucs_error("verbs wire: ibv_reg_mr of %zu bytes on %s failed: %m",
                  length, hca->name);
        return NULL;
    }
    *token_p = mr->rkey | ((uint64_t)lid << 32);
    return mr;
}
