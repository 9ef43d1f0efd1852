# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The base layer's building blocks that the public API does not show on
# their own: the recyclers behind the allocation-free steady state.
hl_add_test(base_recycler_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/base_recycler_test.c
  LABELS base concurrency
  TIMEOUT 120)

# The table of environment variables (runtime/base/env.c) against
# docs/environment.md and hl_environment_check.
hl_add_test(env_table_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/env_table_test.c
  LABELS base
  TIMEOUT 60)
target_compile_definitions(env_table_test PRIVATE
  HL_DOCS_DIR="${PROJECT_SOURCE_DIR}/docs")
