"""Corpus cases: the edges of Python's rules where a tracer is tempted to take a shortcut.
Containers changed while iterated, membership and equality of tensors, tensors formatted as
text, tensors used as Python numbers, views updated in place, and the error messages of misuse."""
import dyntrace as dt
from corpus import Call, I, P, T, case, n_of

# Loops over a list or dict the body changes: the loop reads its container live, as CPython's
# iterators do (a dict that changes size raises RuntimeError).

@case(lambda i: Call(T(3)))
def list_grows_while_iterated(x):
    xs = [x, x * 2]
    for t in xs:
        if len(xs) < 5:
            xs.append(t + 1)
    return len(xs), xs[-1]


@case(lambda i: Call(T(3)))
def list_remove_while_iterated(x):
    vals = [1, 2, 2, 3, 4]
    for v in vals:
        if v % 2 == 0:
            vals.remove(v)
    return x * len(vals), vals


@case(lambda i: Call(T(3)),
      must_break="raises by design: RuntimeError: dictionary changed size")
def dict_changes_size_while_iterated(x):
    d = {"a": x}
    for k in d:
        d[k + "2"] = x * 2
    return d


@case(lambda i: Call(T(3)),
      must_break="tensor values as Python values: `in` takes the truth of y == x")
def tensor_membership_uses_identity_then_eq(x):
    y = x * 2
    return x in [y, x], (y in [y]), x in (y,)


@case(lambda i: Call(T(3)))
def tensor_as_dict_key(x):
    y = x + 1
    d = {x: "x", y: "y"}
    return d[x], d[y], len(d), x in d, (x * 1) in d


@case(lambda i: Call(T(n_of(i))),
      must_break="tensor values as Python values: str/repr/f-string of a tensor print its values")
def fstring_of_tensor_values(x):
    y = x * 2
    return f"{y}", str(y), repr(y.sum()), "%s" % (y[0],), format(y.shape)


@case(lambda i: Call(T(3)),
      must_break="tensor values as Python values: float(t), int(t), bool(t)")
def float_and_int_of_tensors(x):
    s = x.sum()
    return x * float(s), int(s * 10), bool(s > 100), float(x[0]) + 1


@case(lambda i: Call(T(3)),
      must_break="tensor values as Python values: `if x > 0` on 3 elements, which raises")
def bool_of_multi_element_tensor_raises(x):
    if x > 0:
        return x
    return -x


@case(lambda i: Call(T(3), T(3)),
      must_break="tensor values as Python values: max() takes the truth of y > x, which raises")
def max_of_two_tensors_raises(x, y):
    return max(x, y)


@case(lambda i: Call(T(2)),
      must_break="tensor values as Python values: any()/all() take the truth of each element")
def any_all_of_tensor_elements(x):
    return any(v > 0 for v in x), all(v < 5 for v in x), sum(x), list(x)


@case(lambda i: Call(T(3)),
      must_break="raises by design: len()/iter() of a 0-d tensor raise TypeError")
def len_and_iter_of_zero_dim_raise(x):
    s = x.sum()
    try:
        len(s)
    except TypeError as e:
        first = str(e)
    for v in s:
        pass
    return first


@case(lambda i: Call(T(3, 2)),
      must_break="raises by design: unpacking 3 rows into 2 names raises ValueError")
def unpack_tensor_wrong_count_raises(x):
    a, b = x
    return a + b


@case(lambda i: Call(T(3)),
      must_break="raises by design: x.shape[1] of a 1-d tensor raises IndexError")
def shape_index_out_of_range(x):
    return x.shape[1]


@case(lambda i: Call(T(3), [1, 2]),
      must_break="raises by design: zip(strict=True) raises ValueError")
def zip_strict_mismatch_raises(x, xs):
    return [x * v for v, _ in zip(xs, range(3), strict=True)]


@case(lambda i: Call(T(3)),
      must_break="raises by design: str.join raises TypeError")
def join_non_strings_raises(x):
    parts = ["a", 1, "b"]
    return x, "-".join(parts)


@case(lambda i: Call(T(6)))
def view_updated_in_place(x):
    head = x[:3]
    head.mul_(10)
    tail = x[3:]
    tail += head
    return x, head, tail


@case(lambda i: Call(T(4, 3)))
def transposed_view_written(x):
    t = x.T
    t[0] = 1.0
    t[:, 1] *= 2
    return x.sum(0), t.contiguous()


@case(lambda i: Call(T(3)))
def same_tensor_twice(x):
    def axpy(a, b):
        a += b
        return a
    return axpy(x, x), x


@case(lambda i: Call(T(4)))
def tensor_list_of_views_mutated(x):
    parts = [x[k:k + 1] for k in range(4)]
    for k, p in enumerate(parts):
        p.add_(k)
    return x, dt.cat(parts)


@case(lambda i: Call(T(3)))
def in_place_on_tensor_in_dict(x):
    state = {"buf": x.clone()}
    state["buf"].mul_(3)
    state["buf"] += 1
    return state["buf"], x


@case(lambda i: Call(T(3)))
def setitem_with_python_values(x):
    y = x.clone()
    idx = len("ab")
    y[idx] = float(len("hello"))
    y[0] = y[1] * 2
    return y


@case(lambda i: Call(I(4)),
      must_break="raises by design: mul_ raises dyntrace's dtype error")
def int_tensor_in_place_float_raises(x):
    x.mul_(1.5)
    return x


@case(lambda i: Call(T(3)),
      must_break="raises by design: '%d' % 's' raises TypeError (caught)")
def string_multiply_and_percent_errors(x):
    a = "ab" * -1
    b = "%s-%s" % ("x", 1)
    try:
        "%d" % "s"
    except TypeError as e:
        c = str(e)
    return x * len(a), a, b, c, "%(k)s" % {"k": 5}


@case(lambda i: Call(T(3)),
      must_break="raises by design: list.index and list.remove raise ValueError")
def list_index_and_remove_errors(x):
    xs = [1, 2, 3]
    out = []
    for probe in (2, 9):
        try:
            out.append(xs.index(probe))
        except ValueError as e:
            out.append(str(e))
    xs.remove(7)
    return out


@case(lambda i: Call(T(2, 3)),
      must_break="raises by design: reshape raises dyntrace's error")
def reshape_error_message(x):
    y = x * 2
    return y.reshape(4, -1)


@case(lambda i: Call(T(3)),
      must_break="raises by design: add_ raises dyntrace's dtype error")
def dtype_error_message(x):
    return dt.zeros(3, dtype=dt.int64).add_(x)


@case(lambda i: Call(T(3)),
      must_break="raises by design: x @ w raises dyntrace's ShapeError")
def matmul_shape_error(x):
    w = dt.ones(4, 2)
    return x @ w


@case(lambda i: Call(T(3)),
      must_break="raises by design: AttributeError escapes")
def tensor_attribute_typo_raises(x):
    return x.sumx()


@case(lambda i: Call(T(3)),
      must_break="raises by design: calling a float raises TypeError")
def call_non_callable_raises(x):
    cfg = {"scale": 2.0}
    return cfg["scale"](x)


@case(lambda i: Call(T(3)),
      must_break="tensor values as Python values: .item()")
def nested_functions_returning_tuples(x):
    def stats(t):
        return t.mean(), t.amax(), t.amin()

    def describe(t):
        mean, hi, lo = stats(t)
        return {"range": hi - lo, "mean": mean}, (hi, lo)
    info, (hi, lo) = describe(x)
    return info, hi > lo, (hi - lo).item() >= 0
