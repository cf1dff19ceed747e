"""Exact sums in torch tensor operations: the library's ``ExactSum`` (numerics/exact_sum.hpp) for tensors on any
device, so that a sum formed on a GPU, merged by ``torch.distributed`` and rounded there gives the library's bits.

A sum is a row of int64 limbs, limb ``k`` weighing ``2^(lowest + 32 k)``, then three counts: NaN, +inf and -inf
(the library's wire form, with a wider range). A finite double ``v`` is ``M 2^E`` with an integer ``|M| < 2^53``
(``frexp``, exact); a product of two is ``Ma Mb 2^(Ea + Eb)``, formed exactly from 26-bit halves of the mantissas
as two integers below ``2^55``. Each integer lands on three limbs as 32-bit digits (``index_add_`` of int64:
integer addition, so the same limbs in any order, on any device, in any thread or block count), and ranks merge
the rows by ``all_reduce(SUM)`` on int64. A row holds up to ``2^29`` deposits before a limb could overflow.

Rounding follows ``ExactSum::to_double`` step by step: the carries resolved in a fixed number of tensor
operations (two carry passes, then a parallel prefix over the limbs of the last -1/0/+1 carries), the sign, the
top three limbs as a window with a sticky bit, round to nearest even at 53 bits (fewer where subnormal).
``to_double_double`` is that and the rounded remainder. No operation reads a value on the host (no ``.item()``, no
shapes that depend on values), so nothing here waits for the device. The double-double arithmetic of the
finalizers (numerics/double_double.hpp) is here too, with ``fma``'s error term formed exactly by Dekker's product
on mantissas scaled into [0.5, 1). No MPI or torch.distributed calls here.
"""

import sys

LIMB_BITS = 32
DIGIT = (1 << LIMB_BITS) - 1
# Sums of doubles and of products of two doubles: bits from 2^-2252 (two subnormals' 53-bit mantissas) up to
# 2^2079 (2^31 products near 2^2048), with room above for the carries.
LOWEST = -2304
LIMBS = 144
# Products of two such sums (the variance's W Q - S^2).
PRODUCT_LOWEST = 2 * LOWEST
PRODUCT_LIMBS = 2 * LIMBS
SPECIALS = 3  # NaN, +inf, -inf
MAX_DEPOSITS = 1 << 29


def _torch():
    return sys.modules["torch"]


def zeros(rows, device, limbs=LIMBS):
    """``rows`` sums of zero: an int64 ``(rows, limbs + 3)`` tensor."""
    torch = _torch()
    return torch.zeros((rows, limbs + SPECIALS), dtype=torch.int64, device=device)


# ----- terms in -----

def _mantissas(values):
    """Finite float64 ``values`` as ``(M, E)``, int64, ``values = M 2^E`` with ``|M| < 2^53``."""
    torch = _torch()
    fraction, exponent = torch.frexp(values)
    mantissa = (fraction * 9007199254740992.0).to(torch.int64)  # times 2^53: exact, an integer below 2^53
    return mantissa, exponent.to(torch.int64) - 53


def _deposit(sums, rows, value, exponent, lowest=LOWEST):
    """Adds ``value * 2^exponent`` (int64 tensors of one shape, ``|value| < 2^55``, either sign) to the sums' rows
    ``rows`` (int64, broadcast to that shape), exactly: three signed digits on three limbs (two's complement: the
    low 32 bits as a digit, the rest shifted arithmetically)."""
    width = sums.shape[1]
    position = exponent - lowest
    limb, shift = position >> 5, position & 31
    low = (value & DIGIT) << shift    # in [0, 2^63)
    high = (value >> 32) << shift     # |high| < 2^54
    base = (rows * width + limb).reshape(-1)
    flat = sums.view(-1)
    flat.index_add_(0, base, (low & DIGIT).reshape(-1))
    flat.index_add_(0, base + 1, ((low >> 32) + (high & DIGIT)).reshape(-1))
    flat.index_add_(0, base + 2, (high >> 32).reshape(-1))


def _count_specials(sums, rows, classified, active, sum_dims):
    """Adds to the counts of NaN, +inf and -inf the active points where ``classified`` (float64) is each: summed over
    ``sum_dims`` first (so that a row index is one per reduced block), then added to the sums' rows ``rows``."""
    torch = _torch()
    limbs = sums.shape[1] - SPECIALS
    kinds = (torch.isnan(classified), classified == float("inf"), classified == float("-inf"))
    for k, kind in enumerate(kinds):
        counts = (kind & active).sum(dim=sum_dims, dtype=torch.int64)
        sums[:, limbs + k].index_add_(0, rows.reshape(-1), counts.reshape(-1))


def add_values(sums, rows, values, active, sum_dims, classified=None):
    """Adds each float64 value where ``active`` to the sums' row ``rows`` (int64, one per block reduced over
    ``sum_dims``), exactly; a value that is not finite (or whose ``classified``, the term as the library first
    rounds it, is not) goes to the counts instead."""
    torch = _torch()
    classified = values if classified is None else classified
    finite = torch.isfinite(classified) & active
    _count_specials(sums, rows, classified, active & ~finite, sum_dims)
    mantissa, exponent = _mantissas(torch.where(finite, values, torch.zeros_like(values)))
    _deposit(sums, _expand_rows(rows, values, sum_dims), mantissa, exponent)


def add_products(sums, rows, factors, values, active, sum_dims, classified=None):
    """Adds each exact product ``factor * value`` (float64, broadcast together) where ``active`` to the sums' rows,
    as add_values does; ``classified`` defaults to ``values`` (a finite positive factor keeps a special's kind)."""
    torch = _torch()
    factors, values = torch.broadcast_tensors(factors, values)
    classified = values if classified is None else classified
    finite = torch.isfinite(classified) & active
    _count_specials(sums, rows, classified, active & ~finite, sum_dims)
    zero = torch.zeros_like(values)
    ma, ea = _mantissas(torch.where(finite, factors, zero))
    mb, eb = _mantissas(torch.where(finite, values, zero))
    sign = torch.sign(ma) * torch.sign(mb)
    ma, mb = ma.abs(), mb.abs()
    half = (1 << 26) - 1
    a1, a0, b1, b0 = ma >> 26, ma & half, mb >> 26, mb & half
    middle = a1 * b0 + a0 * b1  # below 2^54
    w0 = a0 * b0 + ((middle & half) << 26)  # below 2^53
    w1 = a1 * b1 + (middle >> 26) + (w0 >> 52)  # below 2^55
    w0 = w0 & ((1 << 52) - 1)
    exponent = ea + eb
    targets = _expand_rows(rows, values, sum_dims)
    _deposit(sums, targets, w0 * sign, exponent)
    _deposit(sums, targets, w1 * sign, exponent + 52)


def add_scaled_rows(sums, rows, source, factors):
    """Adds ``factors[k]`` times the exact sum ``source[k]`` to the sums' row ``rows[k]``, exactly, for finite
    non-negative float64 ``factors`` (a row's weight times its exact row sum: the library's per-row form, with the
    values summed once per row instead of multiplied per point). The digits of the normalized sum times the 26- and
    27-bit halves of the factor's mantissa, each product split in two below 2^32, land as four deposits; the counts
    of NaN and infinities carry over."""
    torch = _torch()
    # Each sum as its sign and magnitude (digits in [0, 2^32), the top ones zero: a negative sum's two's complement
    # would carry its sign up to the last limb, and its digits' products beyond the limbs).
    limbs = normalize(source[:, :LIMBS])
    negative = (limbs[:, -1] < 0).unsqueeze(1)
    digits = normalize(torch.where(negative, -limbs, limbs))
    mantissa, exponent = _mantissas(factors)
    magnitude = mantissa.abs()
    sign = torch.sign(mantissa).unsqueeze(1) * torch.where(negative, -1, 1)
    # A digit's weight times the factor's: a non-zero digit of a sum of doubles times a double never falls below
    # the limbs' range (the lowest such digit weighs 2^-1074); zero digits are placed at the range's start.
    weight = LOWEST + LIMB_BITS * torch.arange(LIMBS, device=digits.device) + exponent.unsqueeze(1)
    weight = torch.where(digits == 0, torch.full_like(weight, LOWEST), weight)
    targets = rows.unsqueeze(1).expand(digits.shape)
    for part, shift in ((magnitude & ((1 << 26) - 1), 0), (magnitude >> 26, 26)):
        product = digits * (part.unsqueeze(1) * sign)  # |product| < 2^59, the sum's and the factor's sign
        _deposit(sums, targets, product & DIGIT, weight + shift)
        _deposit(sums, targets, product >> 32, weight + shift + 32)
    sums[:, LIMBS:].index_add_(0, rows, source[:, LIMBS:])


def _expand_rows(rows, values, sum_dims):
    """The row index of each value: ``rows`` (one per block) broadcast over the reduced dims."""
    shape = list(rows.shape)
    for d in sorted(d % values.ndim for d in sum_dims):
        shape.insert(d, 1)
    return rows.reshape(shape).expand(values.shape)


# ----- carries and rounding -----

def _carry_pass(limbs):
    """One carry step below the top limb: each limb's digit kept, its floor carry added to the limb above."""
    torch = _torch()
    carry = limbs[:, :-1] >> LIMB_BITS
    digits = limbs[:, :-1] & DIGIT
    top = limbs[:, -1:]
    return torch.cat((digits[:, :1], digits[:, 1:] + carry[:, :-1], top + carry[:, -1:]), dim=1)


def normalize(limbs):
    """The same integers with every limb but the top one a digit in [0, 2^32) and the top one signed (the library's
    normal form), by a fixed number of operations: two carry passes leave each limb in [-1, 2^32], then the
    carries that ripple (a run of 0 or 2^32 - 1 digits) come from a parallel prefix over the limbs of the maps
    from incoming to outgoing carry."""
    torch = _torch()
    limbs = _carry_pass(_carry_pass(limbs))
    rows, count = limbs.shape
    below = limbs[:, :-1]
    # For each limb below the top, its outgoing carry (-1, 0, 1) for an incoming carry of -1, 0 and +1, as a table
    # indexed by incoming + 1; composed along the limbs by doubling.
    incoming = torch.tensor([-1, 0, 1], dtype=torch.int64, device=limbs.device)
    maps = torch.div(below.unsqueeze(-1) + incoming, 1 << LIMB_BITS, rounding_mode="floor")
    step = 1
    while step < count - 1:
        earlier = maps[:, :-step]
        composed = torch.gather(maps[:, step:], 2, earlier + 1)
        maps = torch.cat((maps[:, :step], composed), dim=1)
        step *= 2
    carries = torch.cat((torch.zeros((rows, 1), dtype=torch.int64, device=limbs.device), maps[:, :, 1]), dim=1)
    summed = limbs + carries
    return torch.cat((summed[:, :-1] & DIGIT, summed[:, -1:]), dim=1)


def _power_of_two(exponent):
    """``2^exponent`` as float64 for int64 exponents in [-1074, ...): built from its bits; +inf above 1023."""
    torch = _torch()
    normal = ((exponent.clamp(-1022, 1023) + 1023) << 52).view(torch.float64)
    subnormal = (torch.ones_like(exponent) << (exponent + 1074).clamp(0, 51)).view(torch.float64)
    value = torch.where(exponent >= -1022, normal, subnormal)
    return torch.where(exponent > 1023, torch.full_like(value, float("inf")), value)


def _bit_length(values):
    """The number of bits of int64 values in [1, 2^53)."""
    torch = _torch()
    return torch.frexp(values.to(torch.float64))[1].to(torch.int64)


def normalize_in_sequence(limbs):
    """``normalize``'s result by one carry step per limb, low to high, on the limbs as columns: fewer operations
    in all than the parallel prefix where rows are many and limbs few (the data group's element sums), at the cost
    of a number of operations that grows with the limbs."""
    torch = _torch()
    columns = limbs.t().contiguous()
    carry = torch.zeros_like(columns[0])
    for k in range(columns.shape[0] - 1):
        column = columns[k] + carry
        carry = column >> LIMB_BITS
        columns[k] = column & DIGIT
    columns[-1] += carry
    return columns.t()


def to_double(sums, lowest=LOWEST, precision=53, smallest=-1074, normalizer=normalize):
    """Each sum rounded to the nearest double, ties to even (``ExactSum::to_double``): NaN for a NaN or both
    infinities, an infinity for one; otherwise the limbs' value, 0.0 for zero and a signed zero below half the
    smallest subnormal. ``precision`` (bits) and ``smallest`` (the lowest bit a subnormal holds) round to a narrower
    type instead, float32's 24 and -149: a float64 that converts to float32 exactly (or is 2^128, which overflows).
    ``normalizer`` resolves the carries (``normalize`` or ``normalize_in_sequence``: the same digits)."""
    torch = _torch()
    limbs_count = sums.shape[1] - SPECIALS
    limbs = sums[:, :limbs_count]
    rows = limbs.shape[0]
    both = normalizer(torch.cat((limbs, -limbs), dim=0))
    negative = both[:rows, -1] < 0
    magnitude = torch.where(negative.unsqueeze(1), both[rows:], both[:rows])
    index = torch.arange(limbs_count, device=limbs.device)
    nonzero = magnitude != 0
    top = torch.where(nonzero, index, torch.zeros_like(index)).amax(dim=1)  # 0 for a zero sum (whose limbs are 0)

    def limb_at(k):
        found = torch.gather(magnitude, 1, k.clamp(min=0).unsqueeze(1)).squeeze(1)
        return torch.where(k >= 0, found, torch.zeros_like(found))

    l2, l1, l0 = limb_at(top), limb_at(top - 1), limb_at(top - 2)
    sticky = (nonzero & (index < (top - 2).unsqueeze(1))).any(dim=1)
    bits = _bit_length(l2.clamp(min=1))
    shift = bits + 1  # the 96-bit window (l2 l1 l0) shifted right so that its top bit is bit 62
    head = (l2 << (63 - bits)) | ((l1 << 31) >> bits) | (l0 >> shift)
    lost = ((l1 << 32) | l0) & ((torch.ones_like(shift) << shift) - 1)
    sticky = sticky | (lost != 0)
    head_exponent = lowest + (top - 2) * LIMB_BITS + shift  # the weight of head's bit 0
    drop = torch.maximum(torch.full_like(head_exponent, 63 - precision), smallest - head_exponent)
    vanishes = drop > 63
    drop = drop.clamp(max=63)
    kept = head >> drop
    below = (torch.ones_like(drop) << drop.clamp(max=62)) - 1
    rest = head & torch.where(drop == 63, torch.full_like(drop, (1 << 63) - 1), below)
    half = torch.ones_like(drop) << (drop - 1)
    up = (rest > half) | ((rest == half) & (sticky | ((kept & 1) != 0)))
    kept = kept + up.to(torch.int64)
    value = kept.to(torch.float64) * _power_of_two(head_exponent + drop)
    value = torch.where(vanishes | (l2 == 0), torch.zeros_like(value), value)
    value = torch.where(negative, -value, value)
    counts = sums[:, limbs_count:]
    nan = (counts[:, 0] > 0) | ((counts[:, 1] > 0) & (counts[:, 2] > 0))
    value = torch.where(counts[:, 1] > 0, torch.full_like(value, float("inf")), value)
    value = torch.where(counts[:, 2] > 0, torch.full_like(value, float("-inf")), value)
    return torch.where(nan, torch.full_like(value, float("nan")), value)


# Sums of one value per rank, elementwise (the data group's exact sum): the limbs of a type's range, from its
# smallest subnormal's lowest deposit (_mantissas' 2^52 times 2^(smallest - 52)) to past its largest value with room
# for the carries; (lowest, limbs, precision, smallest) per type.
ELEMENT_LAYOUTS = {
    "float64": (-1152, 72, 53, -1074),
    "float32": (-224, 14, 24, -149),
}


def element_rows(values, lowest, limbs):
    """Each float64 value as a sum of its own, an int64 row ``(n, limbs + 4)``: its digits, its special counts and a
    last column that counts the values that are not -0 (a merge of -0s alone is -0, as IEEE addition gives). Rows of
    several ranks merge by integer addition (``all_reduce(SUM)``) and round by ``round_elements``."""
    torch = _torch()
    rows = torch.zeros((values.shape[0], limbs + SPECIALS + 1), dtype=torch.int64, device=values.device)
    finite = torch.isfinite(values)
    mantissa, exponent = _mantissas(torch.where(finite, values, torch.zeros_like(values)))
    # The digits land below limb `limbs` (the layouts leave limbs above the largest value's), so the row's width is
    # the deposit's stride.
    _deposit(rows, torch.arange(values.shape[0], device=values.device), mantissa, exponent, lowest)
    for k, kind in enumerate((torch.isnan(values), values == float("inf"), values == float("-inf"))):
        rows[:, limbs + k] = kind.to(torch.int64)
    rows[:, -1] = (~((values == 0) & torch.signbit(values))).to(torch.int64)
    return rows


def round_elements(rows, lowest, precision, smallest):
    """Merged ``element_rows`` rounded once, to nearest with ties to even, to ``precision`` bits (subnormals down to
    ``2^smallest``), as float64: the library's ``reduce_sum_exact`` element by element (NaN for a NaN or both
    infinities, an infinity for one, -0 where every value was -0)."""
    torch = _torch()
    value = to_double(rows[:, :-1], lowest, precision, smallest, normalize_in_sequence)
    return torch.where((value == 0) & (rows[:, -1] == 0), torch.full_like(value, -0.0), value)


def to_double_double(sums, lowest=LOWEST):
    """``(hi, lo)``: each sum rounded (to_double) and its remainder rounded (``ExactSum::to_double_double``); lo is 0
    where hi is not finite."""
    torch = _torch()
    hi = to_double(sums, lowest)
    finite = torch.isfinite(hi)
    rest = sums.clone()
    rest[:, sums.shape[1] - SPECIALS:] = 0
    rows = torch.arange(sums.shape[0], device=sums.device)
    mantissa, exponent = _mantissas(torch.where(finite, -hi, torch.zeros_like(hi)))
    _deposit(rest, rows, mantissa, exponent, lowest)
    lo = to_double(rest, lowest)
    return hi, torch.where(finite, lo, torch.zeros_like(lo))


def multiply(first, second):
    """The exact products of two sets of finite sums (``(rows, LIMBS + 3)`` each) as sums on the product grid
    (``PRODUCT_LOWEST``, ``PRODUCT_LIMBS``), counts zero: 16-bit digits multiplied and summed along each
    anti-diagonal (below 2^41), then carried."""
    torch = _torch()
    rows = first.shape[0]
    a = normalize(first[:, :LIMBS])
    b = normalize(second[:, :LIMBS])
    both = normalize(torch.cat((a, -a, b, -b), dim=0))
    a_negative, b_negative = a[:, -1] < 0, b[:, -1] < 0
    a_magnitude = torch.where(a_negative.unsqueeze(1), both[rows:2 * rows], both[:rows])
    b_magnitude = torch.where(b_negative.unsqueeze(1), both[3 * rows:], both[2 * rows:3 * rows])

    def halves(limbs):
        return torch.stack((limbs & 0xFFFF, limbs >> 16), dim=2).reshape(rows, -1)

    da, db = halves(a_magnitude), halves(b_magnitude)
    n = da.shape[1]
    outer = (da.unsqueeze(2) * db.unsqueeze(1)).reshape(rows, -1)
    diagonal = (torch.arange(n, device=da.device).unsqueeze(1) + torch.arange(n, device=da.device)).reshape(-1)
    digits = torch.zeros((rows, 2 * n), dtype=torch.int64, device=da.device)
    digits.index_add_(1, diagonal, outer)
    limbs = digits[:, 0::2] + (digits[:, 1::2] << 16)  # 16-bit digit pairs as 32-bit limbs, below 2^58
    sign = torch.where(a_negative ^ b_negative, -1, 1).to(torch.int64).unsqueeze(1)
    out = torch.zeros((rows, PRODUCT_LIMBS + SPECIALS), dtype=torch.int64, device=da.device)
    out[:, :PRODUCT_LIMBS] = normalize(limbs * sign)
    return out


# ----- double-double arithmetic (numerics/double_double.hpp), elementwise on float64 tensors -----

def two_sum(a, b):
    s = a + b
    v = s - a
    return s, (a - (s - v)) + (b - v)


def product_error(a, b, product):
    """``fma(a, b, -product)`` for ``product = a * b``, as a correctly rounded fma gives it: Dekker's exact error of
    the product of the mantissas scaled into [0.5, 1), scaled back with one rounding; where the product is below the
    normal range, a zero with the sign of the exact error (which lies within half the smallest subnormal of it);
    ``-product`` where the product is infinite."""
    torch = _torch()
    fa, ea = torch.frexp(a)
    fb, eb = torch.frexp(b)
    p = fa * fb
    split = 134217729.0  # 2^27 + 1

    def halves(x):
        c = split * x
        high = c - (c - x)
        return high, x - high

    ah, al = halves(fa)
    bh, bl = halves(fb)
    scaled_error = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    # Scaled back by 2^(ea + eb) with one rounding: at once where that power is a normal double, else (a product
    # near overflow) by 2^1000 first, which is exact.
    scale = (ea + eb).to(torch.int64)
    first = scale.clamp(-1022, 1000)
    error = scaled_error * _power_of_two(first) * _power_of_two((scale - first).clamp(-1074, 1023))
    # Below the normal range the exact error is (p - product 2^-scale) + scaled_error, in scaled units: the
    # difference is exact (Sterbenz) and so is scaling the product up, in steps of at most 2^1000.
    unscaled, rest = product, -scale
    for _ in range(3):
        step = rest.clamp(0, 1000)
        unscaled, rest = unscaled * _power_of_two(step), rest - step
    tiny = torch.copysign(torch.zeros_like(error), (p - unscaled) + scaled_error)
    error = torch.where(product.abs() >= 2.2250738585072014e-308, error, tiny)
    error = torch.where(torch.isinf(product), -product, error)
    return torch.where(torch.isnan(product), product, error)


def two_product(a, b):
    p = a * b
    return p, product_error(a, b, p)


def dd_add(a, b):
    s, e = two_sum(a[0], b[0])
    return two_sum(s, e + a[1] + b[1])


def dd_negate(a):
    return -a[0], -a[1]


def dd_multiply(a, b):
    p, e = two_product(a[0], b[0])
    return two_sum(p, e + (a[0] * b[1] + a[1] * b[0]))


def dd_divide(a, b):
    """``a / b`` as ``dd::divide``: the double quotient and one Newton correction."""
    torch = _torch()
    q1 = a[0] / b[0]
    zero = torch.zeros_like(q1)
    remainder = dd_add(a, dd_negate(dd_multiply(b, (q1, zero))))
    q2 = remainder[0] / b[0]
    hi, lo = two_sum(q1, q2)
    finite = torch.isfinite(q1)
    return torch.where(finite, hi, q1), torch.where(finite, lo, zero)


def dd_sqrt(a):
    """``dd::sqrt``: the double root and one Newton correction (``sqrt(a.hi)`` alone for ``a.hi <= 0`` or an
    infinite root)."""
    torch = _torch()
    root = torch.sqrt(a[0])
    zero = torch.zeros_like(root)
    plain = ~(a[0] > 0) | ~torch.isfinite(root)
    safe = torch.where(plain, torch.ones_like(root), root)
    remainder = dd_add(a, dd_negate(two_product(safe, safe)))
    hi, lo = two_sum(safe, remainder[0] / (2.0 * safe))
    return torch.where(plain, root, hi), torch.where(plain, zero, lo)
