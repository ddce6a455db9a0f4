"""The per-call half of `evaluation.cider`: a prediction's n-grams matched against its references.

One compiled loop (numba, cached on disk) identifies each n-gram of a prediction by its
(n-1)-gram's id and last token, one hash probe in tables built once from the references
(`ngram_index.KeyTable`), and writes the sums `kernel` turns into scores.
"""

import numba
import numpy as np

from evaluation.cider.df import MAX_N

# Odd 64-bit multiplier (2^64 / golden ratio) for hashing keys.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_LOW32 = np.uint64(32)


@numba.njit(inline="always")
def _home(offset, size, key):
    """A `KeyTable` key's home slot: its region's offset plus a hash ("fastrange")."""
    h = np.uint64(key) * _GOLDEN
    return offset + np.int64(((h >> _LOW32) * np.uint64(size)) >> _LOW32)


@numba.njit(inline="always")
def _find(keys, ids, offset, size, key):
    """Id of `key` in a `KeyTable`'s arrays (region at `offset`, `size` slots), or -1."""
    slot = _home(offset, size, key)
    while True:
        stored = keys[slot]
        if stored == key:
            return np.int64(ids[slot])
        if stored < 0:
            return np.int64(-1)
        slot += 1


@numba.njit(cache=True, nogil=True)
def prediction_statistics(ids, starts, image, vocab_size, token_bits, num_images,
                          union_keys, union_ids, union_offset, union_size,
                          known_keys, known_ids, known_size, union_known, idf2, union_idf2,
                          column_start, entry_segment, entry_weight, entry_tf,
                          clipped, work, first_of_token, dot, hyp_norm2):
    """Adds each prediction's sums to `dot` [C * 4] and `hyp_norm2` [I * 4].
    ids: int64 [T] the predictions' token ids (above `vocab_size`: tokens no reference has);
    starts [P + 1], image [P]; union_* and known_*: the two `KeyTable`s; per entry (a reference
    holding the n-gram) entry_segment, entry_weight (tf_r idf^2), entry_tf. clipped: CIDEr-D.
    work: int64 [5, T] zeros; first_of_token: -1s."""
    # (No array is allocated here: numpy calls would add ~1 s to the first, uncached compilation.)
    # Per token position p: union id, known id, the n-gram's first position in its prediction
    # (`group`) and its count there (`tf`), updated in place order by order; `count` is indexed by
    # first positions.
    union, known, group, tf, count = work
    for n in range(1, MAX_N + 1):
        _look_up(n, ids, starts, image, vocab_size, token_bits, num_images, union_keys,
                 union_ids, union_offset, union_size, known_keys, known_ids, known_size,
                 union_known, union, known)
        for c in range(starts.size - 1):
            first, last = starts[c], starts[c + 1] - n + 1
            _group(n, ids, first, last, first_of_token, group, tf)
            for p in range(first, last):
                count[group[p]] += 1
            norm2 = _add_distinct(first, last, union, known, group, tf, count, idf2,
                                  union_idf2, column_start, entry_segment, entry_weight,
                                  entry_tf, clipped, dot)
            for p in range(first, last):
                count[p] = 0
            hyp_norm2[image[c] * MAX_N + n - 1] += norm2


@numba.njit(inline="always")
def _look_up(n, ids, starts, image, vocab_size, token_bits, num_images, union_keys, union_ids,
             union_offset, union_size, known_keys, known_ids, known_size, union_known, union,
             known):
    """Sets union[p] and known[p] to the ids of the order-`n` n-gram at each position (-1: none),
    from those of the (n-1)-grams at p and p + 1."""
    # Lookups in a loop of their own: its iterations are independent, so the
    # CPU overlaps their cache misses.
    for c in range(starts.size - 1):
        img = image[c]
        region_offset, region_size = union_offset[img], union_size[img]
        for p in range(starts[c], starts[c + 1] - n + 1):
            token = ids[p + n - 1]
            u = k = np.int64(-1)
            if n == 1:
                if token <= vocab_size:
                    u = _find(union_keys, union_ids, region_offset, region_size,
                              (img << token_bits) | token)
                    k = token - 1
            else:
                if union[p] >= 0 and union[p + 1] >= 0:
                    u = _find(union_keys, union_ids, region_offset, region_size,
                              ((num_images + union[p]) << token_bits) | token)
                if u >= 0:
                    k = union_known[u]
                elif known[p] >= 0 and known[p + 1] >= 0:
                    k = _find(known_keys, known_ids, 0, known_size,
                              ((1 + known[p]) << token_bits) | token)
            union[p], known[p] = u, k


@numba.njit(inline="always")
def _group(n, ids, first, last, first_of_token, group, tf):
    """Sets group[p], p in [first, last) of one prediction, to the first position of its n-gram."""
    if n == 1:
        for p in range(first, last):
            if first_of_token[ids[p]] < 0:
                first_of_token[ids[p]] = p
            group[p] = first_of_token[ids[p]]
        for p in range(first, last):
            first_of_token[ids[p]] = -1
    else:
        # Descending p: group[q] for q < p is still the (n-1)-gram's, whose first occurrence it is.
        for p in range(last - 1, first - 1, -1):
            same = p
            if tf[p] >= 2:
                prefix = group[p]
                for q in range(prefix, p):
                    if group[q] == prefix and ids[q + n - 1] == ids[p + n - 1]:
                        same = q
                        break
            group[p] = same


@numba.njit(inline="always")
def _add_distinct(first, last, union, known, group, tf, count, idf2, union_idf2, column_start,
                  entry_segment, entry_weight, entry_tf, clipped, dot):
    """Adds the dot products of one prediction's distinct n-grams (each at its first position) to
    `dot`; sets tf[p]; returns the sum of (tf_h idf)^2."""
    last_idf2 = idf2[idf2.size - 1]
    norm2 = 0.0
    for p in range(first, last):
        tf[p] = count[group[p]]
        if group[p] != p:
            continue
        u, k = union[p], known[p]
        norm2 += tf[p] * tf[p] * (union_idf2[u] if u >= 0 else
                                  idf2[k] if k >= 0 else last_idf2)
        if u >= 0:
            for e in range(column_start[u], column_start[u + 1]):
                weight = min(tf[p], entry_tf[e]) if clipped else tf[p]
                dot[entry_segment[e]] += weight * entry_weight[e]
    return norm2


@numba.njit(inline="always")
def _span_hash(code_points, start, end):
    h = np.uint64(end - start) * _GOLDEN
    for i in range(start, end):
        h = (h ^ np.uint64(code_points[i])) * _GOLDEN
        h ^= h >> np.uint64(29)
    return h


@numba.njit(inline="always")
def _same_span(code_points_a, start_a, end_a, code_points_b, start_b, end_b):
    if end_a - start_a != end_b - start_b:
        return False
    for j in range(end_a - start_a):
        if code_points_a[start_a + j] != code_points_b[start_b + j]:
            return False
    return True


@numba.njit(inline="always")
def _log2(size):
    """log2 of a power of two, as uint64."""
    bits = np.uint64(0)
    while (1 << bits) < size:
        bits += np.uint64(1)
    return bits


@numba.njit(inline="always")
def _home_slot(code_points, start, end, bits):
    return np.int64(_span_hash(code_points, start, end) >> (np.uint64(64) - bits))


@numba.njit(cache=True, nogil=True)
def intern_tokens(code_points, starts, ends, slots, ids, first):
    """Numbers the tokens code_points[starts[i]:ends[i]] by first occurrence; returns V.
    Out: ids (1..V), first (each distinct token's first index), slots (the hash table for
    `token_ids`). Tokens are compared by characters."""
    bits = _log2(slots.size)
    mask = slots.size - 1
    num_distinct = 0
    for i in range(starts.size):
        slot = _home_slot(code_points, starts[i], ends[i], bits)
        while slots[slot] >= 0:
            t = slots[slot]
            if _same_span(code_points, starts[first[t]], ends[first[t]],
                          code_points, starts[i], ends[i]):
                break
            slot = (slot + 1) & mask
        if slots[slot] < 0:
            slots[slot] = num_distinct
            first[num_distinct] = i
            num_distinct += 1
        ids[i] = slots[slot] + 1
    return num_distinct


@numba.njit(cache=True, nogil=True)
def token_ids(slots, table_code_points, table_starts, table_ends, code_points, starts, ends,
              ids):
    """Sets ids[i] to the number + 1 of token i in an `intern_tokens` table (else left as is)."""
    bits = _log2(slots.size)
    mask = slots.size - 1
    for i in range(starts.size):
        slot = _home_slot(code_points, starts[i], ends[i], bits)
        while slots[slot] >= 0:
            t = slots[slot]
            if _same_span(table_code_points, table_starts[t], table_ends[t],
                          code_points, starts[i], ends[i]):
                ids[i] = t + 1
                break
            slot = (slot + 1) & mask


@numba.njit(cache=True, nogil=True)
def group_keys(keys, slots, group, first, count):
    """Groups equal int64 keys in a hash table, numbered by first occurrence; returns the count."""
    bits = _log2(slots.size // 2)
    mask = slots.size // 2 - 1
    num_groups = 0
    for i in range(keys.size):
        key = keys[i]
        slot = np.int64((np.uint64(key) * _GOLDEN) >> (np.uint64(64) - bits))
        while slots[2 * slot + 1] >= 0 and slots[2 * slot] != key:
            slot = (slot + 1) & mask
        if slots[2 * slot + 1] < 0:
            slots[2 * slot] = key
            slots[2 * slot + 1] = num_groups
            first[num_groups] = i
            count[num_groups] = 0
            num_groups += 1
        group[i] = slots[2 * slot + 1]
        count[group[i]] += 1
    return num_groups


@numba.njit(cache=True, nogil=True)
def insert_keys(keys, region, offset, size, table_keys, table_ids):
    """Fills a `KeyTable`: key i (of region[i], or 0) gets id i; False if a probe reached the last
    slot (which must stay empty): retry with a longer table."""
    for i in range(keys.size):
        r = region[i] if region.size else 0
        slot = _home(offset[r], size[r], keys[i])
        while table_keys[slot] >= 0:
            slot += 1
        if slot >= table_keys.size - 1:
            return False
        table_keys[slot] = keys[i]
        table_ids[slot] = i
    return True
