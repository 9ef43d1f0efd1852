// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The progress bar and everything else written to stderr, kept apart on a
// terminal.
//
// When stderr is a terminal, the program's stderr (fd 2) becomes a pipe and
// a relay thread copies what arrives to the terminal: before a line it
// clears the bar, after a complete line it draws the bar again. Log lines of
// the library (written straight to fd 2) therefore never land in the middle
// of the bar. Off a terminal there is no bar and fd 2 is left alone.

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <unistd.h>

#include "bench/stress/stress.h"

static struct {
  bool active;  // Relaying: |tty| is the terminal, fd 2 the pipe.
  int tty;      // The terminal (the original stderr).
  int read_fd;  // The pipe's read end (the relay thread's).
  thrd_t thread;
  mtx_t mutex;     // Guards the fields below and writes to |tty|.
  char bar[160];   // The bar's text ("" when none is shown).
  bool line_open;  // Relayed text ends without a newline.
} stress_terminal;

static void stress_terminal_write(const char* data, size_t length) {
  while (length > 0) {
    ssize_t n = write(stress_terminal.tty, data, length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // The terminal is gone; nothing more to do.
    data += n;
    length -= (size_t)n;
  }
}

static int stress_terminal_relay(void* arg) {
  (void)arg;
  char buffer[4096];
  for (;;) {
    ssize_t n = read(stress_terminal.read_fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    mtx_lock(&stress_terminal.mutex);
    bool bar = stress_terminal.bar[0] != '\0';
    if (bar && !stress_terminal.line_open) {
      stress_terminal_write("\r\033[K", 4);  // Clear the bar's line.
    }
    stress_terminal_write(buffer, (size_t)n);
    stress_terminal.line_open = buffer[n - 1] != '\n';
    if (bar && !stress_terminal.line_open) {
      stress_terminal_write(stress_terminal.bar, strlen(stress_terminal.bar));
    }
    mtx_unlock(&stress_terminal.mutex);
  }
  return 0;
}

bool stress_terminal_is_tty(void) {
  return stress_terminal.active || isatty(2);
}

void stress_terminal_begin(void) {
  if (stress_terminal.active || !isatty(2)) return;
  int fds[2];
  if (pipe(fds) != 0) return;
  int tty = dup(2);
  if (tty < 0 || mtx_init(&stress_terminal.mutex, mtx_plain) != thrd_success) {
    if (tty >= 0) close(tty);
    close(fds[0]);
    close(fds[1]);
    return;
  }
  stress_terminal.tty = tty;
  stress_terminal.read_fd = fds[0];
  stress_terminal.bar[0] = '\0';
  stress_terminal.line_open = false;
  fflush(stderr);
  if (dup2(fds[1], 2) < 0) {
    close(tty);
    close(fds[0]);
    close(fds[1]);
    mtx_destroy(&stress_terminal.mutex);
    return;
  }
  close(fds[1]);
  if (thrd_create(&stress_terminal.thread, stress_terminal_relay, NULL) !=
      thrd_success) {
    dup2(tty, 2);
    close(tty);
    close(fds[0]);
    mtx_destroy(&stress_terminal.mutex);
    return;
  }
  stress_terminal.active = true;
}

void stress_terminal_end(void) {
  if (!stress_terminal.active) return;
  stress_terminal_bar(NULL);
  fflush(stderr);
  // fd 2 back to the terminal closes the pipe's last write end: the relay
  // thread copies what is left, sees the end and returns.
  dup2(stress_terminal.tty, 2);
  thrd_join(stress_terminal.thread, NULL);
  close(stress_terminal.read_fd);
  close(stress_terminal.tty);
  mtx_destroy(&stress_terminal.mutex);
  stress_terminal.active = false;
}

void stress_terminal_bar(const char* text) {
  if (!stress_terminal.active) {
    // No relay (it could not start): draw straight to stderr.
    if (!isatty(2)) return;
    fprintf(stderr, "\r\033[K%s", text ? text : "");
    fflush(stderr);
    return;
  }
  mtx_lock(&stress_terminal.mutex);
  bool shown = stress_terminal.bar[0] != '\0';
  snprintf(stress_terminal.bar, sizeof(stress_terminal.bar), "%s",
           text ? text : "");
  if (!stress_terminal.line_open) {
    if (shown || text) stress_terminal_write("\r\033[K", 4);
    if (text) stress_terminal_write(text, strlen(text));
  }
  mtx_unlock(&stress_terminal.mutex);
}
