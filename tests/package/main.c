// Consumer of an installed hipline: probes the host backend through the
// public API and prints what it found. Exits 0 when the host backend is
// available, 1 otherwise.
#include <stdio.h>

#include "hipline/device.h"
#include "hipline/export.h"
#include "hipline/status.h"

int main(void) {
  hl_backend_info_t info;
  hl_status_t status = hl_backend_query(HL_BACKEND_HOST, &info);
  if (!hl_status_is_ok(status)) {
    hl_status_fprint(stderr, "hipline-consumer: ", status);
    hl_status_free(status);
    return 1;
  }
  printf("hipline %s: %s backend %s, %d device(s)\n", HIPLINE_VERSION_STRING,
         hl_backend_kind_name(info.kind),
         info.available ? "available" : "not available", info.device_count);
  if (!info.available) {
    fprintf(stderr, "hipline-consumer: host backend unavailable: %s\n",
            info.reason);
    return 1;
  }
  return 0;
}
