/* The backend registry of one context: loaded backends, their devices in
 * priority order, and the objects made on them (internal). */
#ifndef QP_REGISTRY_H
#define QP_REGISTRY_H

#include <pthread.h>

#include "backend.h"
#include "internal.h"

#define QP_N_BACKEND_KINDS 4 /* the rows of qp_backend_rows (env.c) */

/* One row per backend kind, indexed by qp_backend_name_index (env.c): a
 * fifth backend is one more row. */
typedef struct qp_backend_row {
    const char *name;         /* "vulkan": QPORT_BACKENDS, device specs      */
    const char *plugin;       /* its plugin file; NULL: built into libqport  */
    const char *build_dir;    /* the plugin's folder in the build tree       */
    int default_order;        /* place in the default QPORT_BACKENDS order   */
    int gpu_rank;             /* device ranking: 0 puts every GPU of this
                               * backend first (CUDA); else a tie-break
                               * within a device class (Vulkan before OpenCL) */
} qp_backend_row;
extern const qp_backend_row qp_backend_rows[QP_N_BACKEND_KINDS];

/* Parsed environment (env.c). Pointers into the environment. */
typedef struct qp_settings {
    int backend_order[QP_N_BACKEND_KINDS]; /* qp_backend_name_index values */
    int n_backends;
    const char *device;        /* QPORT_DEVICE or NULL                     */
    const char *visible;       /* QPORT_VISIBLE_DEVICES or NULL            */
    const char *backend_path;  /* QPORT_BACKEND_PATH or NULL               */
    const char *comm;          /* QPORT_COMM: mpi, nccl, auto, or NULL     */
    double comm_timeout;       /* QPORT_COMM_TIMEOUT seconds (default 300) */
    char cache_dir[512];       /* "" = caching off                         */
    int validation;            /* QPORT_VK_VALIDATION                      */
    int flip_bit;              /* QPORT_TEST_FLIP_BIT (test-hook builds)   */
    const char *knobs[16];     /* backend settings, env.c's knob table     */
} qp_settings;
/* The value of backend setting `name` (env.c's knob table), or NULL. */
const char *qp_settings_knob(const qp_settings *s, const char *name);

typedef struct qp_device_spec {
    int backend;               /* -1: any                                  */
    int index;                 /* -1: any                                  */
    const char *substring;     /* name match when not a backend spec       */
} qp_device_spec;

qp_status qp_settings_read(const qp_context *ctx, qp_settings *s);
bool qp_device_matches_spec(const qp_device_spec *sp, const qp_device *d);
qp_status qp_device_spec_parse(const char *spec, qp_device_spec *out);
int qp_backend_name_index(const char *name, size_t n);
const char *qp_backend_name_at(int i);

typedef struct qp_backend_slot {
    int kind;                  /* index into the backend names              */
    const qp_backend_ops *ops;
    void *state;
    void *dl;                  /* dlopen handle, NULL for built-in          */
    char path[512];
    char note[640];
    int loaded;
    int n_devices;
    int tried;                 /* loading attempted (backends load lazily)   */
} qp_backend_slot;

struct qp_device {
    qp_context *ctx;
    qp_backend_slot *backend;
    void *handle;              /* the backend's device                      */
    qp_device_info info;
    int rank;                  /* selection score, lower is better          */
    pthread_mutex_t lock;      /* serialises calls on this device           */
    int flip_bit;              /* test hook, -1 off                          */
    int imported;              /* qp_device_import made it                   */
    struct qp_device *next_imported; /* the registry's list of imported ones */
};

struct qp_buffer {
    qp_device *dev;
    void *handle;
    size_t size;
    int imported;              /* the application's memory (not freed)      */
};

struct qp_event {
    qp_device *dev;
    void *handle;              /* the backend's event                        */
};

/* One layer on one device (linear.c; bench.c times it). */
struct qp_linear {
    qp_device *dev;
    void *handle;
    int N, K;
    qp_dtype act_dtype, out_dtype;
    qp_buffer *xbuf, *ybuf; /* host-forward staging, grown on demand */
    void *rot;              /* the backend's input rotation, or NULL      */
    qp_buffer *rbuf;        /* rotated activations (reserved for max_m)    */
    int max_m;              /* rows the scratch is reserved for            */
    pthread_mutex_t lock;   /* guards the staging and rotation buffers */
};

typedef struct qp_registry {
    qp_settings settings;
    qp_host host;
    qp_backend_slot slots[QP_N_BACKEND_KINDS];
    int n_slots;
    qp_device **devices;       /* priority order                             */
    size_t n_devices;
    qp_device *imported;       /* qp_device_import's devices (not listed)    */
    pthread_mutex_t imported_lock;
} qp_registry;

/* The enqueue-binding protocol around one backend call (device lock held):
 * sync_begin, the call, sync_end; NULL s: the call alone. */
qp_status qp_device_enqueue_begin(qp_device *dev, const qp_enqueue_sync *s);
qp_status qp_device_enqueue_end(qp_device *dev, const qp_enqueue_sync *s, qp_status st);
/* A device-wide op of the backend (synchronize, flush), taking the device
 * lock; a backend without it (NULL) has nothing to do: QP_OK. */
qp_status qp_device_call_op(qp_device *dev, qp_status (*op)(void *handle));
/* Waits for the device's work (device lock held). */
qp_status qp_device_sync_locked(qp_device *dev);

/* Loads the backends on first use (thread-safe); the error names the
 * invalid environment variable when the settings are bad. */
qp_status qp_registry_get(qp_context *ctx, qp_registry **out);
/* Loads only backend `kind` (a qp_backend_name_index value): what a
 * command that names its devices needs, so `--device cpu:0` loads no plugin
 * and a broken driver cannot kill a run that does not use it. */
qp_status qp_registry_get_kind(qp_context *ctx, int kind, qp_registry **out);
void qp_registry_destroy(qp_registry *reg);
/* The context's registry slot and lock (context.c). */
qp_registry **qp_context_registry_slot(qp_context *ctx);
pthread_mutex_t *qp_context_registry_lock(qp_context *ctx);

/* The built-in reference backend (cpu/cpu_backend.c). */
const qp_backend_ops *qp_cpu_backend_ops(void);

/* Builds the canonical layer description from checkpoint tensors
 * (linear_desc.c); qp_lin_desc_free releases what it allocated. */
typedef struct qp_lin_desc_store qp_lin_desc_store;
qp_status qp_lin_desc_build(qp_context *ctx, const qp_scheme *scheme, int N, int K, const qp_tensor *t, size_t n,
                            const qp_linear_options *opts, qp_lin_desc *desc, qp_lin_desc_store **store);
void qp_lin_desc_free(qp_lin_desc_store *store);

#endif
