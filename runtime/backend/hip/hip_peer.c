// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Peers on the hip backend: hipDeviceCanAccessPeer, then, to enable,
// hipDeviceEnablePeerAccess from this device (plain device memory) and
// hipMemPoolSetAccess on the peer's pool for this device, since memory of
// a stream-ordered pool is reachable only from the devices its pool grants
// (the CUDA and HIP rule: peer access does not cover pool memory). The pool
// grants all of its allocations, those made before and after, so
// hipline's suballocator slabs carved from it need nothing more. Peer
// copies are hipMemcpyPeerAsync on the copying device's stream.

#include "runtime/backend/hip/hip_internal.h"

hl_status_t hl_hip_peer_can_access(hl_backend_t* base, hl_backend_t* base_peer,
                                   bool* out_can_access) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hl_hip_backend_t* peer = hl_hip_backend_cast(base_peer);
  *out_can_access = false;
  if (backend->ordinal == peer->ordinal) {
    *out_can_access = true;
    return hl_ok_status();
  }
  const hl_hip_dynamic_symbols_t* syms = backend->syms;
  if (!syms->hipDeviceCanAccessPeer || !syms->hipDeviceEnablePeerAccess ||
      !syms->hipMemPoolSetAccess) {
    return hl_ok_status();  // Without all three, staged it is.
  }
  int can = 0;
  HL_HIP_RETURN_IF_ERROR(
      syms, hipDeviceCanAccessPeer(&can, backend->ordinal, peer->ordinal),
      "hipDeviceCanAccessPeer(device %d, peer %d)", backend->ordinal,
      peer->ordinal);
  *out_can_access = can != 0;
  return hl_ok_status();
}

hl_status_t hl_hip_peer_enable(hl_backend_t* base, hl_backend_t* base_peer) {
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  hl_hip_backend_t* peer = hl_hip_backend_cast(base_peer);
  if (backend->ordinal == peer->ordinal) return hl_ok_status();
  const hl_hip_dynamic_symbols_t* syms = backend->syms;
  if (!syms->hipDeviceEnablePeerAccess || !syms->hipMemPoolSetAccess) {
    return HL_MAKE_STATUS(HL_STATUS_UNAVAILABLE,
                          "the HIP library lacks hipDeviceEnablePeerAccess or "
                          "hipMemPoolSetAccess");
  }
  hl_hip_device_scope_t scope;
  HL_RETURN_IF_ERROR_PLAIN(hl_hip_scope_enter(backend, &scope));
  hipError_t error = syms->hipDeviceEnablePeerAccess(peer->ordinal, 0);
  hl_status_t st = NULL;
  if (error != HL_HIP_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
    st = hl_hip_result_to_status(syms, error, __FILE__, __LINE__,
                                 "hipDeviceEnablePeerAccess(peer %d) on "
                                 "device %d",
                                 peer->ordinal, backend->ordinal);
  }
  hl_hip_scope_exit(backend, &scope);
  HL_RETURN_IF_ERROR_PLAIN(st);
  hipMemAccessDesc desc = {
      .location = {HL_HIP_MEM_LOCATION_TYPE_DEVICE, backend->ordinal},
      .flags = HL_HIP_MEM_ACCESS_FLAGS_PROT_READ_WRITE};
  HL_HIP_RETURN_IF_ERROR(
      syms, hipMemPoolSetAccess(peer->pool, &desc, 1),
      "hipMemPoolSetAccess(pool of device %d, device %d read-write)",
      peer->ordinal, backend->ordinal);
  return hl_ok_status();
}

hl_status_t hl_hip_memcpy_peer_async(hl_backend_t* base, void* dst,
                                     hl_backend_t* dst_backend, const void* src,
                                     hl_backend_t* src_backend, size_t size,
                                     hl_backend_stream_t* stream) {
  if (size == 0) return hl_ok_status();
  hl_hip_backend_t* backend = hl_hip_backend_cast(base);
  int dst_device = hl_hip_backend_cast(dst_backend)->ordinal;
  int src_device = hl_hip_backend_cast(src_backend)->ordinal;
  hipStream_t handle = hl_hip_stream_handle(stream);
  if (!backend->syms->hipMemcpyPeerAsync) {
    // Unified addressing: a plain copy between two devices' memory.
    return HL_HIP_RESULT_TO_STATUS(
        backend->syms,
        hipMemcpyAsync(dst, src, size, HL_HIP_MEMCPY_DEFAULT, handle),
        "hipMemcpyAsync(%p on device %d <- %p on device %d, %zu bytes)", dst,
        dst_device, src, src_device, size);
  }
  return HL_HIP_RESULT_TO_STATUS(
      backend->syms,
      hipMemcpyPeerAsync(dst, dst_device, src, src_device, size, handle),
      "hipMemcpyPeerAsync(%p on device %d <- %p on device %d, %zu bytes, "
      "stream %p)",
      dst, dst_device, src, src_device, size, (void*)handle);
}
