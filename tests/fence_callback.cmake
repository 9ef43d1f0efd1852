# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# hl_fence_call_when_reached (fence.h), the callback the Python binding's
# asyncio awaits are built on: bad input, empty fences, partial and full
# reach, failures, and concurrent registration (TSan runs the `concurrency`
# label).
hl_add_test(fence_callback_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fence_callback_test.c
  LABELS timeline concurrency
  TIMEOUT 120)
