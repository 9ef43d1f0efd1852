# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The PyTorch caching allocator model that hipline-stress's replay reports
# beside hipline (bench/stress/torch_model.c), built straight into the test.
hl_add_test(torch_model_test
  SOURCES torch_model_test.c ${PROJECT_SOURCE_DIR}/bench/stress/torch_model.c
          ${PROJECT_SOURCE_DIR}/bench/replay_log.c
  LABELS replay TIMEOUT 60)
