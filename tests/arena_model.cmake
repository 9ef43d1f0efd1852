# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The ideal best-fit arena that hipline-stress's replay reports beside
# hipline and the PyTorch model (bench/stress/arena_model.c), built straight
# into the test.
hl_add_test(arena_model_test
  SOURCES arena_model_test.c ${PROJECT_SOURCE_DIR}/bench/stress/arena_model.c
          ${PROJECT_SOURCE_DIR}/bench/replay_log.c
  LABELS replay TIMEOUT 60)
