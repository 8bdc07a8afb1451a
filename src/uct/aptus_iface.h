/*
 * UCX-Aptus: what every transport's interface does alike.
 */
#ifndef UCT_APTUS_IFACE_H_
#define UCT_APTUS_IFACE_H_

#include <uct/api/uct.h>

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

#endif
