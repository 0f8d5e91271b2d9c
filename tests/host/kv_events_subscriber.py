#!/usr/bin/env python3
"""A KV-event subscriber written from vLLM's documented format (vLLM v0.10/v0.11,
vllm/distributed/kv_events.py and examples/online_serving/kv_events_subscriber.py), not from the
Host's code: it rebuilds, from the events alone, the set of (block hash, medium) a publisher holds.

PUB frames: [topic, seq (8 bytes big-endian), msgpack KVEventBatch]; a batch is
[ts, [event...], data_parallel_rank] and an event a tagged array: ["BlockStored", block_hashes,
parent_block_hash, token_ids, block_size, lora_id, medium], ["BlockRemoved", block_hashes,
medium] or ["AllBlocksCleared"]. Replay: send [start_seq (8 bytes)] to the ROUTER (here through a
DEALER, with the empty delimiter frame); it answers [seq, payload] for each buffered batch with
seq >= start_seq, then [-1 (8 bytes, signed), b""].

Usage: kv_events_subscriber.py --pub EP --replay EP --expect FILE [--ready FILE]
  --ready: write FILE once subscribed, then listen live until --expect appears (a live
           subscriber); without it the subscriber joined late and catches up through replay alone.
  --expect: a JSON list of [block, medium] (what the Host's Describe says it holds), written by
            the test once every event was published. Exit 0 when the rebuilt set equals it.
"""
import argparse
import json
import os
import sys
import time

import msgpack
import zmq


class Index:
    def __init__(self):
        self.held = set()
        self.last_seq = -1
        self.live = 0
        self.replayed = 0
        self.topics = set()

    def apply(self, seq, payload, live):
        if seq <= self.last_seq:
            return  # already applied (replay overlaps what came live)
        if seq != self.last_seq + 1:
            raise RuntimeError(f"gap: applying {seq} after {self.last_seq}")
        ts, events, dp_rank = msgpack.unpackb(payload, raw=False)
        assert isinstance(ts, float) and isinstance(dp_rank, int), (ts, dp_rank)
        for event in events:
            tag = event[0]
            if tag == "BlockStored":
                _, hashes, parent, token_ids, block_size, lora_id, medium = event[:7]
                assert isinstance(token_ids, list) and isinstance(block_size, int)
                for h in hashes:
                    self.held.add((h, medium))
            elif tag == "BlockRemoved":
                _, hashes, medium = event[:3]
                for h in hashes:
                    self.held.discard((h, medium))
            elif tag == "AllBlocksCleared":
                self.held.clear()
            else:
                raise RuntimeError(f"unknown event {tag!r}")
        self.last_seq = seq
        if live:
            self.live += 1
        else:
            self.replayed += 1


def replay(ctx, endpoint, index):
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(endpoint)
    dealer.send_multipart([b"", (index.last_seq + 1).to_bytes(8, "big")])
    while True:
        if not dealer.poll(10000):
            raise RuntimeError("replay: no answer in 10 s")
        frames = dealer.recv_multipart()
        assert len(frames) == 3 and frames[0] == b"", frames
        seq = int.from_bytes(frames[1], "big", signed=True)
        if seq == -1:
            break
        index.apply(seq, frames[2], live=False)
    dealer.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pub", required=True)
    ap.add_argument("--replay", required=True)
    ap.add_argument("--expect", required=True)
    ap.add_argument("--ready")
    args = ap.parse_args()

    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(args.pub)
    index = Index()
    if args.ready:
        time.sleep(0.2)  # let the subscription reach the publisher
        with open(args.ready, "w") as f:
            f.write("ready\n")
    deadline = time.time() + 60
    while True:
        if sub.poll(50):
            topic, seq_bytes, payload = sub.recv_multipart()
            index.topics.add(topic.decode())
            seq = int.from_bytes(seq_bytes, "big")
            if seq > index.last_seq + 1:
                replay(ctx, args.replay, index)  # missed some: catch up first
            index.apply(seq, payload, live=True)
            continue
        if os.path.exists(args.expect):
            break
        if time.time() > deadline:
            print("timed out waiting for", args.expect)
            return 2
    replay(ctx, args.replay, index)  # the tail (everything, for a late joiner)
    with open(args.expect) as f:
        expected = {(b, m) for b, m in json.load(f)}
    got = index.held
    print(f"live batches {index.live}, replayed {index.replayed}, last seq {index.last_seq}, "
          f"topics {sorted(index.topics)}, held {len(got)}")
    if got != expected:
        print("missing:", sorted(expected - got))
        print("extra:", sorted(got - expected))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
