/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The property the fast path stands on, hammered across two processes the
 * way rc_fp writes on the sock wire: the writer moves each message image
 * into the reader's block with one process_vm_writev of the pieces
 * aptus_fp_write_pieces gives, and a reader that sees the byte it polls
 * must see every byte of the message. (With the image as one piece the
 * fixed-slot modes fail here within a few hundred messages on x86: the
 * kernel's rep movs made payload bytes visible before the length.) A
 * forked child polls its ring and checks every message's length and
 * content while the parent writes as fast as credits allow; in each of the
 * three ring modes.
 */
#include <gtest/gtest.h>

extern "C" {
#include "proto/fp_ring.h"
}

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace
{

const unsigned num_msgs = 100000;

uint32_t msg_len(unsigned i, uint32_t max)
{
    return (i * 2654435761u >> 7) % (max < 700 ? max + 1 : 700);
}

uint8_t msg_byte(unsigned i, uint32_t k)
{
    return (uint8_t)(i * 31 + k * 7 + 1);
}

/* The child: poll, check, release, return credits through the pipe.
 * Exit status 0 when every message was whole. */
int reader(const aptus_fp_geom_t &geom, uint8_t *block, int credit_fd)
{
    aptus_fp_rx_t rx;
    aptus_vb_msg_t msg;
    uint32_t max = aptus_fp_max_len(&geom);

    aptus_fp_rx_init(&rx, &geom);
    for (unsigned i = 0; i < num_msgs;) {
        aptus_vb_status_t st = aptus_fp_rx_poll(&rx, block, &msg);
        if (st == APTUS_VB_EMPTY) {
            continue;
        }
        if ((st != APTUS_VB_OK) || (msg.length != msg_len(i, max))) {
            fprintf(stderr,
                    "reader: message %u: status %d length %u, %u "
                    "expected\n",
                    i, (int)st, msg.length, msg_len(i, max));
            return 2;
        }
        for (uint32_t k = 0; k < msg.length; ++k) {
            if (msg.data[k] != msg_byte(i, k)) {
                return 3; /* the flag came before the bytes */
            }
        }
        aptus_fp_rx_release(&rx, block, &msg);
        ++i;
        if (aptus_fp_rx_pending_credits(&rx) >=
            aptus_fp_credits_total(&geom) / 4) {
            uint32_t c = aptus_fp_rx_take_credits(&rx);
            if (write(credit_fd, &c, sizeof(c)) != sizeof(c)) {
                return 4;
            }
        }
    }
    return 0;
}

class fp_vm_write : public ::testing::TestWithParam<aptus_fp_mode_t>
{
};

} // namespace

TEST_P(fp_vm_write, flag_written_last_is_seen_last_across_processes)
{
    aptus_fp_geom_t geom;
    const char *why;
    ASSERT_EQ(0, aptus_fp_geom_make(GetParam(), 32768, 32, 8192, &geom, &why));
    /* the block must be the child's own memory (not shared): the parent
     * reaches it only through process_vm_writev */
    std::vector<uint8_t> block(geom.size, 0);
    int fds[2];
    ASSERT_EQ(0, pipe(fds));

    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(fds[0]);
        _exit(reader(geom, block.data(), fds[1]));
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);

    aptus_fp_tx_t tx;
    aptus_fp_tx_init(&tx, &geom);
    uint32_t max = aptus_fp_max_len(&geom);
    std::vector<uint8_t> scratch(aptus_vb_image_len(max));
    std::vector<uint8_t> mirror(aptus_fp_send_bytes(&geom) + 1);
    std::vector<uint8_t> payload(max + 1);
    unsigned written = 0, wraps = 0;
    bool failed = false;
    for (unsigned i = 0; (i < num_msgs) && !failed;) {
        uint32_t len = msg_len(i, max);
        for (uint32_t k = 0; k < len; ++k) {
            payload[k] = msg_byte(i, k);
        }
        struct iovec piov = { payload.data(), len };
        const uint8_t *image;
        aptus_vb_write_t w;
        aptus_vb_status_t st = aptus_fp_tx_pack(&tx, &piov, 1, scratch.data(),
                                                mirror.data(), &image, &w);
        if ((st == APTUS_VB_OK) || (st == APTUS_VB_WRAPPED)) {
            /* as the sock wire's write_ordered: a vector per piece */
            aptus_fp_piece_t pieces[APTUS_FP_MAX_PIECES];
            struct iovec local[APTUS_FP_MAX_PIECES];
            struct iovec remote[APTUS_FP_MAX_PIECES];
            unsigned count = aptus_fp_write_pieces(&geom, &w, pieces);
            for (unsigned p = 0; p < count; ++p) {
                local[p]  = { (void *)(image + pieces[p].offset),
                              pieces[p].length };
                remote[p] = { block.data() + w.offset + pieces[p].offset,
                              pieces[p].length };
            }
            if (process_vm_writev(child, local, count, remote, count, 0) !=
                (ssize_t)w.total) {
                ADD_FAILURE() << "process_vm_writev: " << strerror(errno);
                failed = true;
            }
            if (st == APTUS_VB_OK) {
                ++i;
                ++written;
            } else {
                ++wraps;
            }
            continue;
        }
        ASSERT_EQ(APTUS_VB_NO_ROOM, st);
        uint32_t c;
        ssize_t n = read(fds[0], &c, sizeof(c));
        if (n == sizeof(c)) {
            ASSERT_EQ(APTUS_VB_OK, aptus_fp_tx_credit(&tx, c));
        } else if (n == 0) {
            break; /* the reader stopped early: its status says why */
        }
    }
    if (failed) {
        kill(child, SIGKILL);
    }
    int status;
    ASSERT_EQ(child, waitpid(child, &status, 0));
    close(fds[0]);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(0, WEXITSTATUS(status))
        << "2: bad length or status, 3: torn message, 4: pipe";
    EXPECT_EQ(num_msgs, written);
    if (GetParam() == APTUS_FP_VELOBLOCK) {
        EXPECT_GT(wraps, 0u);
    }
}

INSTANTIATE_TEST_SUITE_P(
    modes, fp_vm_write,
    ::testing::Values(APTUS_FP_VELOBLOCK, APTUS_FP_ORIGINAL,
                      APTUS_FP_ORIGINAL_REDUCED),
    [](const ::testing::TestParamInfo<aptus_fp_mode_t> &info) {
        return std::string(aptus_fp_mode_names[info.param]);
    });
