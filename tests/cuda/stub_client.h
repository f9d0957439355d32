/* stub_client.h — what the tests that drive the real CUDA plugin against the
 * stand-in driver (and the stand-in NCCL) share: loading the stand-ins by
 * their full paths before vdev loads the plugin, configuring them, and the
 * checks every such test makes (no rule of the driver broken, nothing left
 * alive, the order of stream work in the stand-in's trace). */
#ifndef VDEV_STUB_CLIENT_H
#define VDEV_STUB_CLIENT_H

#include "backend/backend.h"
#include "stub_cuda.h"
#include "stub_nccl.h"

/* The stand-in driver's control functions (valid after stub_load). */
extern struct vdev_stub_api S;
/* The stand-in NCCL's, after stub_load_nccl (NULL entries before). */
extern struct vdev_stub_nccl_api N;
/* The stand-in driver's handle, for dlsym of driver functions. */
extern void *stub_handle;

/* dlopens the stand-in driver (VDEV_STUB_CUDA_PATH); 0, or -1 saying why on stderr. */
int stub_load(void);
/* dlopens the stand-in NCCL (VDEV_STUB_NCCL_PATH), so that the plugin's
 * dlopen("libnccl.so.2") finds it; 0, or -1 saying why on stderr. */
int stub_load_nccl(void);
/* A new configuration of the stand-in driver. */
void stub_setup(int n, uint64_t total, int driver, int init_result, int no_vmm, int no_peer);
void stub_setup_ctx(int n, uint64_t total, uint64_t context_bytes);
/* n devices of compute capability cc (major * 10 + minor). */
void stub_setup_cc(int n, uint64_t total, int cc);
/* Both stand-ins for the NCCL tests: n GPUs of 4 GiB (driver 13.0), NCCL
 * reporting `version` (0: its default), each communicator taking 64 MiB of
 * its GPU, and an ncclGroupEnd with calls queued sleeping delay_ms first. */
void stub_setup_nccl(int n, int version, unsigned delay_ms);
/* No violation of the driver's rules so far (a check), and when `empty`, no
 * object of the stand-in alive (another). */
void stub_expect_clean_at(const char *file, int line, const char *where, int empty);
#define expect_clean(where, empty) stub_expect_clean_at(__FILE__, __LINE__, where, empty)
/* Opens the plugin (a failed check saying why when it does not). */
void stub_open_backend(struct vdev_backend *b);
/* Whether the trace holds, in order, lines matching each pattern (a pattern
 * is a line with %d where an event id goes, matched by sscanf). */
int stub_trace_has(const char *trace, const char *const *pat, int n_pat);
/* The id of the stream the first line of the trace starting with "S<id> "
 * and containing `what` names, or -1. */
int stub_trace_stream(const char *trace, const char *what);

#endif /* VDEV_STUB_CLIENT_H */
