/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus fuzz target: the grammar of UCX_APTUS_SEND_RULES
 * (proto/send_rules.h). Any text is accepted or refused with a position
 * inside it; an accepted chain formats to text that parses to the same
 * canonical form.
 */
#include "fuzz_common.h"
#include "proto/send_rules.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[1024], canon[4096], again[4096];
    aptus_rule_chain_t chain, chain2;
    aptus_rule_error_t err;

    if (size >= sizeof(text)) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    if (aptus_rule_chain_parse(text, &chain, &err) != 0) {
        FUZZ_CHECK(err.position >= 1);
        FUZZ_CHECK(err.position <= strlen(text) + 1);
        return 0;
    }
    FUZZ_CHECK(aptus_rule_chain_format(&chain, canon, sizeof(canon)) <
               sizeof(canon));
    FUZZ_CHECK(aptus_rule_chain_parse(canon, &chain2, &err) == 0);
    FUZZ_CHECK(aptus_rule_chain_format(&chain2, again, sizeof(again)) <
               sizeof(again));
    FUZZ_CHECK(strcmp(canon, again) == 0);
    return 0;
}
