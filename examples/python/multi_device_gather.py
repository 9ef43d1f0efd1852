# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# A gather across every device: each device computes its shard, then every
# device collects all shards by copies on its own queue, each ordered after
# the producer's fill by a fence (never a host wait). Between devices that
# reach each other the copies are peer copies; otherwise hipline stages
# them through host memory (see docs/multi-device.md).
#
#   HIPLINE_HOST_DEVICES=4 LIBHIPLINE=build/lib/libhipline.so \
#       PYTHONPATH=runtime/bindings/python \
#       python3 examples/python/multi_device_gather.py
#   (HIPLINE_HOST_PEERS=all=off stages every copy; HIPLINE_BACKEND=hip
#   runs on the GPUs)
import struct
import sys

import hipline

SHARD = 64 * 1024  # Bytes per device.


def all_of(fences):
    joined = hipline.Fence()
    for f in fences:
        joined.join(f)
    return joined


def main():
    devices = hipline.devices()                      # every device of the backend
    n = len(devices)
    hipline.enable_peer_access(devices)              # every pair that can
    queues = [d.create_queue() for d in devices]
    shards, computed = [], []
    for seed, q in enumerate(queues):                # each device's shard
        shard = q.alloca(SHARD)
        computed.append(q.fill_pattern(shard, seed, wait=shard.ready))
        shards.append(shard)
    gathered, done = [], []
    for q in queues:                                 # every shard to every device
        out = q.alloca(n * SHARD)
        copies = [q.copy(shard, out, target_offset=i * SHARD,
                         wait=all_of([computed[i], out.ready]))
                  for i, shard in enumerate(shards)]
        done.append(all_of(copies))
        gathered.append(out)
    for k, (q, out, fence) in enumerate(zip(queues, gathered, done)):
        data = bytearray(len(out))
        q.read(out, data, wait=fence).wait()
        words = struct.unpack("<%dI" % (len(data) // 4), data)
        per = SHARD // 4
        for i in range(n):
            want = [hipline.pattern_value(i, w) for w in range(per)]
            if list(words[i * per:(i + 1) * per]) != want:
                sys.exit("device %d holds a wrong shard %d" % (k, i))
    for q, shard, out in zip(queues, shards, gathered):
        q.dealloca(out)                              # waits for the readers
        q.dealloca(shard)                            # waits for every peer's copy
        q.wait_idle()
    for d in devices:
        s = d.peer_stats()
        print("device %d: %d peer copies, %d staged, %d cross-device waits"
              % (d.properties.ordinal, s.peer_copies, s.staged_copies,
                 s.cross_device_waits))
    for q in queues:
        q.close()
    for d in devices:
        d.close()
    print("gathered %d shards of %d bytes on %d devices" % (n, SHARD, n))


main()
