"""The exact sums in torch operations (python/gridshard/_exact_torch.py) against exact rational arithmetic: sums of
doubles and of products of two doubles, and products of two sums, rounded to nearest even with their rounded
remainders, as Python's ``float(Fraction)`` rounds them; fma's error term; over values from subnormals to near
overflow, with cancellation. One process, no MPI."""
import math
import random
import struct
from fractions import Fraction

import pytest

torch = pytest.importorskip("torch")

from gridshard import _exact_torch as exact  # noqa: E402

RNG = random.Random(1)


def value():
    kind = RNG.random()
    if kind < 0.1:
        return RNG.choice([1, -1]) * struct.unpack("d", struct.pack("Q", RNG.getrandbits(52)))[0]  # subnormal
    if kind < 0.2:
        return RNG.choice([1, -1]) * 2.0 ** RNG.randint(-1074, 1023) * RNG.random()
    if kind < 0.5:
        return RNG.uniform(-1e8, 1e8)
    return RNG.gauss(0, 1) * 10.0 ** RNG.randint(-20, 20)


def rounded(fraction):
    """The fraction rounded to nearest even, an infinity beyond the doubles, and its remainder rounded."""
    try:
        hi = float(fraction)
    except OverflowError:
        return (math.inf if fraction > 0 else -math.inf), 0.0
    return hi, float(fraction - Fraction(hi))


def as_row(values):
    return torch.tensor([values], dtype=torch.float64)


def everywhere(row):
    return torch.ones_like(row, dtype=torch.bool)


def same(got, want):
    assert struct.pack("d", got) == struct.pack("d", want), (got, want)


CASES = [[value() for _ in range(RNG.randint(1, 40))] for _ in range(150)]
CASES = [c + [-v for v in c[: len(c) // 2]] if k % 3 == 0 else c for k, c in enumerate(CASES)]  # cancellation


@pytest.mark.parametrize("case", range(len(CASES)))
def test_sums_products_and_products_of_sums_are_rounded_exactly(case):
    values = CASES[case]
    factors = [value() for _ in values]
    row, factor_row = as_row(values), as_row(factors)
    sums = exact.zeros(1, "cpu")
    exact.add_values(sums, torch.tensor([0]), row, everywhere(row), (-1,))
    hi, lo = exact.to_double_double(sums)
    want = rounded(sum(map(Fraction, values), Fraction(0)))
    same(float(hi[0]), want[0])
    same(float(lo[0]), want[1])

    products = exact.zeros(1, "cpu")
    exact.add_products(products, torch.tensor([0]), factor_row, row, everywhere(row), (-1,))
    want = rounded(sum((Fraction(a) * Fraction(b) for a, b in zip(factors, values)), Fraction(0)))
    hi, lo = exact.to_double_double(products)
    same(float(hi[0]), want[0])
    same(float(lo[0]), want[1])

    other = exact.zeros(1, "cpu")
    exact.add_values(other, torch.tensor([0]), factor_row, everywhere(factor_row), (-1,))
    product = exact.multiply(sums, other)
    want = rounded(sum(map(Fraction, values), Fraction(0)) * sum(map(Fraction, factors), Fraction(0)))
    hi, lo = exact.to_double_double(product, exact.PRODUCT_LOWEST)
    same(float(hi[0]), want[0])
    same(float(lo[0]), want[1])


def test_specials_count_as_the_library_counts_them():
    row = as_row([1.0, math.nan, 2.0])
    cases = {(math.inf, 1.0): math.inf, (-math.inf, 1.0): -math.inf, (math.inf, -math.inf): math.nan,
             (math.nan, 1.0): math.nan}
    for values, want in cases.items():
        row = as_row(list(values))
        sums = exact.zeros(1, "cpu")
        exact.add_values(sums, torch.tensor([0]), row, everywhere(row), (-1,))
        got = float(exact.to_double(sums)[0])
        assert (math.isnan(got) and math.isnan(want)) or got == want, (values, got)
    masked = exact.zeros(1, "cpu")
    exact.add_values(masked, torch.tensor([0]), as_row([1.0, math.nan]), torch.tensor([[True, False]]), (-1,))
    assert float(exact.to_double(masked)[0]) == 1.0  # a value left out is never counted, NaN or not


def test_a_sum_below_half_the_smallest_subnormal_is_a_signed_zero():
    tiny = 5e-324
    sums = exact.zeros(1, "cpu")
    exact.add_products(sums, torch.tensor([0]), as_row([-tiny]), as_row([0.25]), torch.tensor([[True]]), (-1,))
    same(float(exact.to_double(sums)[0]), -0.0)
    sums = exact.zeros(1, "cpu")
    same(float(exact.to_double(sums)[0]), 0.0)


def test_product_error_is_fmas():
    for _ in range(20000):
        a, b = value(), value()
        product = a * b
        if not math.isfinite(product):
            continue
        got = float(exact.product_error(as_row([a]), as_row([b]), as_row([product]))[0, 0])
        want = float(Fraction(a) * Fraction(b) - Fraction(product))  # fma's, one rounding
        same(got, want)


@pytest.mark.parametrize("case", range(0, len(CASES), 5))
def test_a_row_weight_times_a_row_sum_is_exact(case):
    """add_scaled_rows (the per-row form): a factor from 2^-500 to 2^500 times a sum of either sign, exactly."""
    values = CASES[case]
    row = as_row([v for v in values if abs(v) < 1e300])  # the product stays finite
    source = exact.zeros(1, "cpu")
    exact.add_values(source, torch.tensor([0]), row, everywhere(row), (-1,))
    for factor in (2.0 ** -500, 0.7, 3.0, 2.0 ** 500 * 1.25):
        sums = exact.zeros(1, "cpu")
        exact.add_scaled_rows(sums, torch.tensor([0]), source, as_row([factor])[0])
        want = rounded(Fraction(factor) * sum(map(Fraction, row[0].tolist()), Fraction(0)))
        hi, lo = exact.to_double_double(sums)
        same(float(hi[0]), want[0])
        same(float(lo[0]), want[1])


def rounded_to(total, precision, smallest):
    """The fraction rounded to nearest even at ``precision`` bits, subnormals at ``2^smallest`` (no overflow)."""
    if total == 0:
        return 0.0
    magnitude = abs(total)
    e = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    while Fraction(2) ** e > magnitude:
        e -= 1
    while Fraction(2) ** (e + 1) <= magnitude:
        e += 1
    quantum = Fraction(2) ** (max(e, smallest + precision - 1) - precision + 1)
    return float(round(total / quantum) * quantum)  # round() of a Fraction: half to even


@pytest.mark.parametrize("layout", sorted(exact.ELEMENT_LAYOUTS))
def test_merged_element_rows_round_to_the_exact_sum_and_carry_in_sequence_as_in_parallel(layout):
    """Rows of one value each, merged as the data group merges them (integer addition), rounded once to the
    layout's type: the exact sum of the values rounded to its precision, -0 where every value is -0; the carries
    resolved in sequence give the parallel prefix's digits."""
    lowest, limbs, precision, smallest = exact.ELEMENT_LAYOUTS[layout]
    narrow = "f" if layout == "float32" else "d"
    ieee = (24, -149) if layout == "float32" else (53, -1074)  # the type's own, not the layout's
    largest = 3.0e38 if layout == "float32" else 1.0e308
    cases = CASES[:60] + [[-0.0, -0.0], [0.0, -0.0], [1.0, 2.0 ** -24, 2.0 ** -80], [1.0, 2.0 ** -24]]
    for case in cases:
        values = [struct.unpack(narrow, struct.pack(narrow, v))[0] for v in case if abs(v) < largest / 64]
        if not values:
            continue
        rows = sum(exact.element_rows(torch.tensor([v], dtype=torch.float64), lowest, limbs) for v in values)
        assert torch.equal(exact.normalize(rows[:, :limbs]), exact.normalize_in_sequence(rows[:, :limbs]))
        got = float(exact.round_elements(rows, lowest, precision, smallest)[0])
        want = rounded_to(sum(Fraction(v) for v in values), *ieee)
        if want == 0 and all(v == 0 and math.copysign(1, v) < 0 for v in values):
            want = -0.0
        same(got, want)
