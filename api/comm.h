/*
 * The communicator interface: what a communicator plugin
 * (libqport-mpi.so, libqport-nccl.so) implements, and what the core hands
 * it. The same pattern as the backends (backend.h): a plugin exports one
 * symbol, `qp_comm_entry`, returning its ops table; it does not link
 * libqport; errors and logging arrive in the host table.
 *
 * A communicator is the job's set of ranks (one process each, as mpirun
 * starts them). Host-buffer collectives are required; device-buffer
 * variants are optional (NULL: not offered).
 *
 * Ordering: allgather and broadcast move bytes, so they are exact; the
 * parallel layers (parallel.c) reduce by allgather + a sum in rank order
 * on the host, never with allreduce_sum, whose summation order is the
 * library's own (MPI_Allreduce, NCCL rings and trees). allreduce_sum is
 * offered for callers that do not need reproducible bits.
 */
#ifndef QP_COMM_H
#define QP_COMM_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin_host.h"
#include "qport.h"

#define QP_COMM_ABI_VERSION 1u

struct qp_comm_ops;

/* Services of the core, valid from init until shutdown. */
typedef struct qp_comm_host {
    QP_PLUGIN_HOST_HEAD;
    /* A communicator already joined that a device communicator bootstraps
     * from (NCCL: rank, size, and the broadcast of ncclUniqueId): the MPI
     * plugin's ops and state. NULL for a communicator that needs none. */
    const struct qp_comm_ops *boot;
    void *boot_state;
    /* QPORT_COMM_TIMEOUT (env.c): a collective that has not completed
     * after this many seconds fails with QP_ERR_DEVICE naming the ranks
     * that did not answer. Read it only when struct_size covers it. */
    double timeout_s;
} qp_comm_host;

typedef struct qp_comm_ops {
    uint32_t abi_version;    /* QP_COMM_ABI_VERSION                          */
    size_t struct_size;      /* sizeof(qp_comm_ops)                          */
    const char *name;        /* "mpi", "nccl"                                */
    int needs_boot;          /* 1: init needs host->boot (NCCL)              */

    /* Joins the job. A missing runtime, driver or device is
     * QP_ERR_UNSUPPORTED with the reason (host->error); the core then has
     * no communicator of this kind. */
    qp_status (*init)(const qp_comm_host *host, void **state);
    void (*shutdown)(void *state);
    int (*rank)(void *state);
    int (*size)(void *state);
    /* The library and version ("Open MPI v4.1.4", "NCCL 2.28.3"). */
    void (*describe)(void *state, char *out, size_t cap);

    /* Host buffers. Every rank calls each collective with the same sizes. */
    qp_status (*barrier)(void *state);
    qp_status (*broadcast)(void *state, void *buf, size_t bytes, int root);
    /* recv [size][bytes]: rank r's `send` at r * bytes. */
    qp_status (*allgather)(void *state, const void *send, size_t bytes, void *recv);
    /* recv[i] = sum over ranks of send[i], n elements of dt (F32; F16/BF16
     * where the library has them), in the library's order. */
    qp_status (*allreduce_sum)(void *state, qp_dtype dt, const void *send, void *recv, size_t n);

    /* ---- Optional: device buffers (raw device pointers of the plugin's
     * runtime, e.g. CUDA), NULL when not offered. ---- */
    qp_status (*allgather_device)(void *state, const void *send, size_t bytes, void *recv);
    qp_status (*allreduce_sum_device)(void *state, qp_dtype dt, const void *send, void *recv, size_t n);
} qp_comm_ops;

typedef const qp_comm_ops *(*qp_comm_entry_fn)(void);
#define QP_COMM_ENTRY_SYMBOL "qp_comm_entry"

/* One naming pattern across communicators: plugin P implements op X as
 * P_X (qp_mpi_barrier, qp_nccl_allgather). QP_COMM_OPS_INIT fills a
 * qp_comm_ops initializer with the version, size, name and the required
 * ops; a plugin adds needs_boot and its optional device ops after.
 * QP_COMM_PLUGIN_ENTRY(ops) is the plugin's one export. */
#define QP_COMM_OPS_INIT(P, nm)                                                                        \
    .abi_version = QP_COMM_ABI_VERSION, .struct_size = sizeof(qp_comm_ops), .name = nm, .init = P##_init, \
    .shutdown = P##_shutdown, .rank = P##_rank, .size = P##_size, .describe = P##_describe,              \
    .barrier = P##_barrier, .broadcast = P##_broadcast, .allgather = P##_allgather,                      \
    .allreduce_sum = P##_allreduce_sum
#define QP_COMM_PLUGIN_ENTRY(ops) \
    __attribute__((visibility("default"))) const qp_comm_ops *qp_comm_entry(void) { return &(ops); }

#endif
