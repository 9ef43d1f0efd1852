// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Symbol visibility for the hipline library. Everything is hidden by default
// (-fvisibility=hidden); HL_API marks the public surface.
#ifndef HIPLINE_EXPORT_H_
#define HIPLINE_EXPORT_H_

#if defined(HIPLINE_STATIC_DEFINE)
#define HL_API
#elif defined(__GNUC__)
#define HL_API __attribute__((visibility("default")))
#else
#define HL_API
#endif

#define HIPLINE_VERSION_MAJOR 0
#define HIPLINE_VERSION_MINOR 1
#define HIPLINE_VERSION_PATCH 0
#define HIPLINE_VERSION_STRING "0.1.0"

#endif  // HIPLINE_EXPORT_H_
