/* nccl_abi.h — the part of NCCL's public interface the CUDA plugin uses:
 * its handle, result, data type and reduction types and the prototypes of
 * the functions cuda_nccl.c resolves from libnccl.so.2 at run time (the
 * library is never linked, and its header need not be installed where the
 * plugin is built). The values are NCCL 2's stable ABI (nccl.h); the
 * stand-in library of tests/cuda/stub_nccl.c implements these prototypes. */
#ifndef VDEV_NCCL_ABI_H
#define VDEV_NCCL_ABI_H

#include <limits.h>
#include <stddef.h>

typedef struct ncclComm *ncclComm_t;

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7
} ncclResult_t;

typedef enum {
    ncclInt8 = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclFloat32 = 7,
    ncclFloat64 = 8
} ncclDataType_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

/* ncclUniqueId: the bytes that name a communicator to its ranks. */
typedef struct {
    char internal[128];
} ncclUniqueId;
/* ncclConfig_t as NCCL 2.14 laid it out. NCCL copies the first `size` bytes
 * over its defaults (later versions added fields after these), and takes a
 * field of NCCL_CONFIG_UNDEF_INT (INT_MIN) or a NULL pointer as not set;
 * `magic` is NCCL_CONFIG_INITIALIZER's, `version` the layout's. */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;           /* 0: every call returns at once, ncclInProgress while at work */
    int cga_cluster_size;
    int min_ctas;
    int max_ctas;
    const char *net_name;
} ncclConfig_t;
#define VDEV_NCCL_CONFIG_MAGIC 0xcafebeefu
#define VDEV_NCCL_CONFIG_UNDEF_INT INT_MIN /* NCCL_CONFIG_UNDEF_INT */
/* NCCL_VERSION(X, Y, Z) for 2.9 and later: X * 10000 + Y * 100 + Z. */
#define VDEV_NCCL_VERSION_CODE(x, y, z) ((x) * 10000 + (y) * 100 + (z))

/* The stream argument is a cudaStream_t, the same handle as a CUstream. */
typedef struct CUstream_st *vdev_nccl_stream_t;

typedef ncclResult_t (*vdev_ncclGetVersion_fn)(int *version);
typedef const char *(*vdev_ncclGetErrorString_fn)(ncclResult_t result);
typedef ncclResult_t (*vdev_ncclGetUniqueId_fn)(ncclUniqueId *id);
typedef ncclResult_t (*vdev_ncclCommInitRankConfig_fn)(ncclComm_t *comm, int nranks,
                                                       ncclUniqueId id, int rank,
                                                       ncclConfig_t *config);
typedef ncclResult_t (*vdev_ncclCommDestroy_fn)(ncclComm_t comm);
typedef ncclResult_t (*vdev_ncclCommAbort_fn)(ncclComm_t comm);
typedef ncclResult_t (*vdev_ncclCommGetAsyncError_fn)(ncclComm_t comm, ncclResult_t *async_error);
typedef ncclResult_t (*vdev_ncclGroupStart_fn)(void);
typedef ncclResult_t (*vdev_ncclGroupEnd_fn)(void);
typedef ncclResult_t (*vdev_ncclAllReduce_fn)(const void *sendbuff, void *recvbuff, size_t count,
                                              ncclDataType_t datatype, ncclRedOp_t op,
                                              ncclComm_t comm, vdev_nccl_stream_t stream);
typedef ncclResult_t (*vdev_ncclBroadcast_fn)(const void *sendbuff, void *recvbuff, size_t count,
                                              ncclDataType_t datatype, int root, ncclComm_t comm,
                                              vdev_nccl_stream_t stream);
typedef ncclResult_t (*vdev_ncclAllGather_fn)(const void *sendbuff, void *recvbuff,
                                              size_t sendcount, ncclDataType_t datatype,
                                              ncclComm_t comm, vdev_nccl_stream_t stream);

#endif /* VDEV_NCCL_ABI_H */
