#!/usr/bin/env python3
"""A cost model of the Hopper prefill's CTA scheduling, to choose a persistent schedule before
building it.

Each CTA (one 128-query tile of a request and q head) costs START + PER_TILE x its key tiles. The
two costs come from fitting two measured shapes of one device call (bench/RESULTS.md: 8 x 4096 and
1 x 16384 on an H100 gave START ~6.6 us and PER_TILE ~1.70 us). With these, the model reproduces
the measured times of the one-CTA-per-tile kernel (2184 us modelled against 2153-2182 us measured at
8 x 4096) and of the persistent variant with a plain stride (3610 against 3575 us).

Schedules modelled, on SMS SMs with one CTA each:
  hardware         one CTA per tile in launch order (x descending within each head), each to the
                   first SM that frees up;
  stride           persistent, CTA b takes items b, b + SMS, ... in the kernel's x order;
  i-major stride   persistent, items ordered by tile index within the request, longest first,
                   then request, then head;
  i-major zigzag   the same, every other round walked backwards (b, then SMS - 1 - b, ...).
A persistent CTA pays ITEM_START per item instead of START per CTA (its producer streams the next
item's K/V under the current one's tail); the table varies it, since only a build can measure it.

  usage: python3 bench/prefill_schedule_model.py [--sms 132] [--start 6.6] [--per-tile 1.70]
"""
import argparse
import heapq

TILE = 128  # query rows per CTA; key tiles are 128 keys too (head 128)
HEADS = 32


def tiles_of(reqs):
    """Per request (cached, query_len): the key tiles each of its query tiles sees (causal)."""
    return [[(cached + min(q, (i + 1) * TILE) - 1) // TILE + 1 for i in range((q + TILE - 1) // TILE)]
            for cached, q in reqs]


def x_order(reqs):
    """The kernel's grid order: per head, x descending; x = qsl[r] / 128 + r + i (slots between
    requests hold no tile and cost a CTA that finds nothing)."""
    tiles, slots, qsl = tiles_of(reqs), {}, 0
    for r, (_, q) in enumerate(reqs):
        for i, n in enumerate(tiles[r]):
            slots[qsl // TILE + r + i] = n
        qsl += q
    nx = qsl // TILE + len(reqs)
    return [slots.get(nx - 1 - j, 0) for _ in range(HEADS) for j in range(nx)]


def i_major_order(reqs):
    tiles = tiles_of(reqs)
    longest = max(len(t) for t in tiles)
    return [t[i] if i < len(t) else 0 for i in range(longest - 1, -1, -1) for t in tiles
            for _ in range(HEADS)]


def hardware(order, sms, start, per_tile, empty=0.3):
    free = [0.0] * sms
    for n in order:
        s = heapq.heappop(free)
        heapq.heappush(free, s + (start + per_tile * n if n else empty))
    return max(free)


def persistent(order, sms, item_start, per_tile, zigzag, empty=0.05):
    loads = [0.0] * sms
    for k in range(0, len(order), sms):
        rnd = order[k:k + sms]
        for b in range(sms):
            idx = sms - 1 - b if zigzag and (k // sms) % 2 else b
            if idx < len(rnd):
                n = rnd[idx]
                loads[b] += item_start + per_tile * n if n else empty
    return max(loads)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sms", type=int, default=132)
    p.add_argument("--start", type=float, default=6.6, help="us per CTA (one-CTA-per-tile kernel)")
    p.add_argument("--per-tile", type=float, default=1.70, help="us per key tile")
    a = p.parse_args()
    shapes = {"8 x 4096": [(0, 4096)] * 8, "1 x 16384": [(0, 16384)],
              "4 x (2048 on 2048)": [(2048, 2048)] * 4}
    print(f"modelled makespan, us ({a.sms} SMs, START {a.start} us, PER_TILE {a.per_tile} us)")
    print(f"{'shape':20s} {'hardware':>9s} | persistent, ITEM_START = {'1.0':>6s} {'2.0':>6s} "
          f"{'4.0':>6s} {'START':>6s}")
    for name, reqs in shapes.items():
        hw = hardware(x_order(reqs), a.sms, a.start, a.per_tile)
        print(f"{name:20s} {hw:9.0f} |")
        for label, order, zig in (("stride", x_order(reqs), False),
                                  ("i-major stride", i_major_order(reqs), False),
                                  ("i-major zigzag", i_major_order(reqs), True)):
            cells = " ".join(f"{persistent(order, a.sms, s, a.per_tile, zig):6.0f}"
                             for s in (1.0, 2.0, 4.0, a.start))
            print(f"{'':20s} {'':9s} | {label:24s} {cells}")


if __name__ == "__main__":
    main()
