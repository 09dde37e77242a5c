"""Corpus: tensors. ``torch.*`` functions and tensor methods with keyword arguments, in-place ops,
indexing and index assignment, grad modes and autocast as ``with`` blocks and decorators, tensor
attributes, and Python operators on tensors, each in one graph.

PYTEST_DONT_REWRITE: pytest must not rewrite the ``assert`` statements of the corpus functions;
they are user code under test, compiled exactly as CPython compiles them.
"""

import pytest
import torch
import torch.nn.functional as F
from corpus.harness import R, case, case_ids, run_case


# -- torch functions with keyword arguments ----------------------------------------------------
def torch_sum_mean(x):
    return torch.sum(x, dim=0, keepdim=True), torch.mean(x, dim=1), torch.sum(x)


def torch_cat_stack(x, y):
    return torch.cat([x, y], dim=0), torch.stack((x, y), dim=1)


def torch_clamp_where(x):
    return torch.clamp(x, min=-0.5, max=0.5), torch.where(x > 0, x, torch.zeros_like(x))


def torch_matmul_einsum(a, b):
    return torch.matmul(a, b), torch.einsum("ij,jk->ik", a, b), torch.mm(a, b)


def torch_factories(x):
    return (x + torch.zeros(3, dtype=torch.float32), torch.ones(2, 2, dtype=torch.float64),
            torch.full((2,), 3.5), torch.arange(5, dtype=torch.float32), torch.eye(2),
            torch.linspace(0, 1, steps=4))


def torch_like_factories(x):
    return torch.ones_like(x), torch.zeros_like(x, dtype=torch.int64), torch.full_like(x, 7.0)


def torch_tensor_constant(x):
    return x + torch.tensor([1.0, 2.0, 3.0]), torch.tensor(2, dtype=torch.int32)


def torch_softmax_family(x):
    return torch.softmax(x, dim=-1), torch.log_softmax(x, dim=1), F.softmax(x, dim=0)


def functional_activations(x):
    return F.relu(x), F.gelu(x, approximate="tanh"), F.silu(x), F.leaky_relu(x, 0.2), F.elu(x)


def functional_linear(x, w, b):
    return F.linear(x, w, b), F.linear(x, w)


def functional_layer_norm(x):
    return F.layer_norm(x, normalized_shape=(4,), eps=1e-6)


def functional_pad_dropout_eval(x):
    return F.pad(x, (1, 2), value=0.5), F.dropout(x, p=0.5, training=False)


def functional_conv(x, w):
    return F.conv1d(x, w, padding=1), F.max_pool1d(x, kernel_size=2)


def torch_reductions_named(x):
    top = torch.topk(x, 2, dim=-1)
    best = torch.max(x, dim=0)
    return top.values, top.indices, best.values, best.indices, torch.argmax(x, dim=1)


def torch_split_chunk(x):
    a, b = torch.split(x, [2, 4], dim=1)
    parts = torch.chunk(x, 3, dim=1)
    return a, b, len(parts), parts[2]


def torch_cumsum_flatten(x):
    return torch.cumsum(x, dim=1), torch.flatten(x, start_dim=0), torch.tril(x), torch.diag(x)


def torch_add_alpha_out_of_place(x, y):
    return torch.add(x, y, alpha=2), torch.sub(x, y, alpha=0.5), torch.addmm(x, x, y, beta=0.5)


def torch_comparisons(x, y):
    return torch.eq(x, y), torch.gt(x, 0), torch.maximum(x, y), torch.isclose(x, x)


def torch_type_promotion(x):
    i = torch.arange(3)
    return x + i, i * 2.5, (i / 2).dtype, (i + True).dtype


def torch_finfo(x):
    eps = torch.finfo(torch.float32).eps
    return x + eps, torch.finfo(x.dtype).max > 1e38


# -- tensor methods ----------------------------------------------------------------------------
def method_views(x):
    return x.view(-1), x.reshape(3, 2), x.permute(1, 0), x.transpose(0, 1), x.t().contiguous()


def method_unsqueeze_expand(x):
    y = x.unsqueeze(0)
    return y, y.expand(4, 3), x.repeat(2), y.squeeze(0), x.unsqueeze(-1).shape


def method_reductions_kwargs(x):
    return x.sum(dim=1), x.mean(dim=0, keepdim=True), x.std(dim=1), x.norm(dim=1), x.amax(dim=0)


def method_dtype_conversions(x):
    return x.to(torch.float64), x.to(dtype=torch.int32), x.float(), x.double(), x.long(), x.half()


def method_type_as_and_new(x, y):
    return (y.type_as(x), x.new_zeros(2), x.new_ones((2, 2)), x.new_full((3,), 4.0),
            x.new_tensor(1.0))


def method_clone_detach(x):
    y = x.clone()
    return y * 2, x.detach() + 1


def method_masked_fill(x):
    return x.masked_fill(x > 0, 0.0), x.clamp(min=0), x.abs().sqrt(), x.exp().log1p()


def method_size_queries(x):
    return x * x.size(0), x.size(), x.dim(), x.numel(), x.size(-1), x.element_size()


def method_chunk_split(x):
    a, b = x.chunk(2)
    c, d = x.split(2)
    return a + b, c - d


def method_sort_argsort(x):
    values, indices = x.sort(dim=0, descending=True)
    return values, indices, x.argsort(), x.sort().values


def method_pow_and_friends(x):
    return x.pow(2), x.sigmoid(), x.tanh(), x.softmax(dim=0), x.cumsum(0), x.flip(0)


def method_bool_ops(x):
    m = x > 0
    return m.any(), m.all(), m.float().mean(), (~m).sum(), m.logical_and(m)


def method_matmul_family(a, b):
    return a.matmul(b), a @ b, a.mm(b), a.mv(b[:, 0]), a[0].dot(b[0])


# -- in-place operations -----------------------------------------------------------------------
def inplace_on_argument(x):
    x.add_(1)
    x.mul_(2)
    return x


def inplace_returns_none(x):
    x.add_(1)


def inplace_on_local(x):
    y = x.clone()
    y.add_(1).mul_(3)
    y.clamp_(min=0)
    return y


def inplace_augmented_assign(x, y):
    x += 1
    x *= y
    x -= 0.5
    return x


def inplace_augmented_local(x):
    y = x * 1
    y += x
    y /= 2
    y **= 2
    return y


def inplace_zero_fill_copy(x, y):
    a = x.clone()
    a.zero_()
    b = x.clone()
    b.fill_(3.0)
    c = x.clone()
    c.copy_(y)
    return a, b, c


def inplace_masked_fill(x):
    x.masked_fill_(x < 0, 0.0)
    return x.sum()


def inplace_torch_functions(x):
    y = x.clone()
    torch.relu_(y)
    torch.sigmoid_(y)
    return y


def inplace_aliasing_view(x):
    v = x.view(-1)
    v.mul_(2)
    return x


def inplace_out_kwarg(x, y):
    out = torch.empty(3)
    torch.add(x, y, out=out)
    return out


# -- indexing ----------------------------------------------------------------------------------
def index_basic(x):
    return x[0], x[-1], x[1:], x[:, 0], x[1, 2], x[0][1]


def index_ellipsis_none(x):
    return x[..., 1:], x[:, None], x[None], x[..., None, 0], x[None, ..., -1]


def index_steps(x):
    return x[::2], x[1::2, ::3], x[:, 1:3], x[-2:, :-1]


def index_mask(x):
    return x[x > 0]


def index_mask_argument(x, mask):
    return x[mask].sum()


def index_integer_tensor(x, idx):
    return x[idx], x[:, idx]


def index_list_of_ints(x):
    return x[[0, 2]], x[[0, 1], [1, 2]]


def index_with_shape_values(x):
    n = x.shape[0]
    return x[n // 2], x[: n - 1]


def index_select_gather(x, idx):
    return torch.index_select(x, 0, idx), x.gather(1, idx.unsqueeze(1).expand(-1, 3) % 3)


# -- index assignment --------------------------------------------------------------------------
def setitem_scalar(x):
    y = x.clone()
    y[0] = 1
    y[1, 2] = -1.0
    return y


def setitem_argument(x):
    x[0] = 0.0
    return x.sum()


def setitem_slice_tensor(x, row):
    y = x.clone()
    y[:, 0] = row
    y[1:] = 7.0
    return y


def setitem_mask(x):
    y = x.clone()
    y[y > 0] = 0.0
    return y


def setitem_ellipsis(x):
    y = x.clone()
    y[..., -1] = 2.0
    return y


def setitem_index_tensor(x, idx):
    y = x.clone()
    y[idx] = 5.0
    return y


def setitem_augmented(x):
    y = x.clone()
    y[1:3] += 1
    y[0] *= 2
    return y


def index_put_method(x, idx):
    return x.index_put((idx,), torch.tensor(9.0)), x.clone().index_fill_(0, idx, -1.0)


# -- grad modes and autocast -------------------------------------------------------------------
@torch.no_grad()
def helper_no_grad(x):
    return x * 2


@torch.enable_grad()
def helper_enable_grad(x):
    return x * 3


@torch.set_grad_enabled(False)
def helper_grad_disabled(x):
    return x * 4


@torch.autocast("cpu", dtype=torch.bfloat16)
def helper_autocast(a, b):
    return a @ b


@torch.no_grad()
def decorated_no_grad(x):
    return x * 2 + 1


def no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    z = x * 3
    return y, z, y.requires_grad, z.requires_grad


def enable_grad_inside_no_grad(x):
    with torch.no_grad():
        a = x + 1
        with torch.enable_grad():
            b = x + 2
    return a, b


def set_grad_enabled_block(x):
    with torch.set_grad_enabled(False):
        y = x * 2
    return y, torch.is_grad_enabled()


def set_grad_enabled_argument(x, flag):
    with torch.set_grad_enabled(flag):
        return x * 2


def is_grad_enabled_inside(x):
    with torch.no_grad():
        inside = torch.is_grad_enabled()
    return x * 2, inside, torch.is_grad_enabled()


def no_grad_decorator_on_helper(x):
    return helper_no_grad(x), x * 2


def enable_grad_decorator_inside_no_grad(x):
    with torch.no_grad():
        return helper_enable_grad(x)


def set_grad_enabled_decorator_on_helper(x):
    return helper_grad_disabled(x), x * 2


def autocast_block(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        c = torch.mm(a, b)
    return c, c.dtype, (a + b).dtype


def autocast_device_type_keyword(a, b):
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        return a @ b


def autocast_nested_disabled(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inner = a @ b
        with torch.autocast("cpu", enabled=False):
            outer = a @ b
    return inner, outer


def autocast_decorator_on_helper(a, b):
    return helper_autocast(a, b)


def no_grad_then_backward_graph(x):
    with torch.no_grad():
        scale = x.abs().max()
    return x * scale


# -- tensor attributes -------------------------------------------------------------------------
def attribute_shape_dtype_device(x):
    return x.sum(), x.shape, x.dtype, x.device, x.ndim


def attribute_shape_arithmetic(x):
    b, n = x.shape
    return x.reshape(b * n), x.shape[0] * 2, x.shape[-1]


def attribute_transpose(x):
    return x.T, x.mT, x.T.shape


def attribute_requires_grad(x):
    y = x * 2
    return y, x.requires_grad, y.requires_grad, x.is_leaf


def attribute_dtype_properties(x):
    return x + 1, x.dtype.is_floating_point, x.dtype.itemsize, x.is_floating_point()


def attribute_device_type(x):
    return x + 1, x.device.type, x.is_cpu, str(x.device)


def attribute_grad_fn_none(x):
    return x * 2, x.grad_fn is None


# -- Python operators on tensors ---------------------------------------------------------------
def operators_arithmetic(x, y):
    return x + y, x - 1.5, 2 * x, x / y, x // 2, x % 3, -x, +x, x ** 2, 2 ** x


def operators_comparison(x, y):
    return x > 0, x <= y, x == y, x != 1, 0 < x


def operators_bitwise(a, b):
    return a & b, a | b, a ^ b, ~a


def operators_integer(a):
    return a << 1, a >> 1, a // 2, a % 3, abs(a)


def operators_matmul(a, b):
    return a @ b, (a @ b).sum()


def operators_reflected_scalars(x):
    return 1 - x, 2 / (x.abs() + 1), 3 + x, 10 % (x.abs() + 1)


# -- a module as an argument -------------------------------------------------------------------
def module_argument_call(m, x):
    return m(x).relu()


def module_parameters_read(m, x):
    return x @ m.weight.t() + m.bias, m.in_features


CASES = [
    case(torch_sum_mean, R(2, 3)),
    case(torch_cat_stack, R(3), R(3)),
    case(torch_clamp_where, R(5)),
    case(torch_matmul_einsum, R(2, 3), R(3, 4)),
    case(torch_factories, R(3)),
    case(torch_like_factories, R(3)),
    case(torch_tensor_constant, R(3)),
    case(torch_softmax_family, R(2, 3)),
    case(functional_activations, R(5)),
    case(functional_linear, R(2, 3), R(4, 3), R(4)),
    case(functional_layer_norm, R(2, 4)),
    case(functional_pad_dropout_eval, R(2, 3)),
    case(functional_conv, R(1, 2, 6), R(3, 2, 3)),
    case(torch_reductions_named, R(3, 4)),
    case(torch_split_chunk, R(2, 6)),
    case(torch_cumsum_flatten, R(3, 3)),
    case(torch_add_alpha_out_of_place, R(3, 3), R(3, 3)),
    case(torch_comparisons, R(3), R(3)),
    case(torch_type_promotion, R(3)),
    case(torch_finfo, R(3)),
    case(method_views, R(2, 3)),
    case(method_unsqueeze_expand, R(3)),
    case(method_reductions_kwargs, R(3, 4)),
    case(method_dtype_conversions, R(3)),
    case(method_type_as_and_new, R(3), R(3, dtype=torch.int64)),
    case(method_clone_detach, R(3)),
    case(method_masked_fill, R(5)),
    case(method_size_queries, R(2, 3)),
    case(method_chunk_split, R(4)),
    case(method_sort_argsort, R(5)),
    case(method_pow_and_friends, R(4)),
    case(method_bool_ops, R(5)),
    case(method_matmul_family, R(3, 3), R(3, 3)),
    case(inplace_on_argument, R(3)),
    case(inplace_returns_none, R(3)),
    case(inplace_on_local, R(3)),
    case(inplace_augmented_assign, R(3), R(3)),
    case(inplace_augmented_local, R(3)),
    case(inplace_zero_fill_copy, R(3), R(3)),
    case(inplace_masked_fill, R(5)),
    case(inplace_torch_functions, R(4)),
    case(inplace_aliasing_view, R(2, 2)),
    case(inplace_out_kwarg, R(3), R(3)),
    case(index_basic, R(3, 4)),
    case(index_ellipsis_none, R(2, 3)),
    case(index_steps, R(6, 6)),
    case(index_mask, R(6)),  # fullgraph=True captures data-dependent sizes
    case(index_mask_argument, R(6), R(6, dtype=torch.bool)),
    case(index_integer_tensor, R(3, 3), torch.tensor([2, 0])),
    case(index_list_of_ints, R(3, 3)),
    case(index_with_shape_values, R(4, 2)),
    case(index_select_gather, R(3, 3), torch.tensor([2, 0, 1])),
    case(setitem_scalar, R(3, 3)),
    case(setitem_argument, R(3)),
    case(setitem_slice_tensor, R(3, 2), R(3)),
    case(setitem_mask, R(6)),
    case(setitem_ellipsis, R(2, 3)),
    case(setitem_index_tensor, R(4), torch.tensor([0, 3])),
    case(setitem_augmented, R(4)),
    case(index_put_method, R(4), torch.tensor([1, 2])),
    case(no_grad_block, R(3, requires_grad=True)),
    case(enable_grad_inside_no_grad, R(3, requires_grad=True)),
    case(set_grad_enabled_block, R(3, requires_grad=True)),
    case(set_grad_enabled_argument, R(3, requires_grad=True), False),
    case(is_grad_enabled_inside, R(3)),
    case(no_grad_decorator_on_helper, R(3, requires_grad=True)),
    case(enable_grad_decorator_inside_no_grad, R(3, requires_grad=True)),
    case(decorated_no_grad, R(3, requires_grad=True), name="no_grad_decorator_on_compiled"),
    case(set_grad_enabled_decorator_on_helper, R(3, requires_grad=True)),
    case(autocast_block, R(2, 2), R(2, 2)),
    case(autocast_device_type_keyword, R(2, 2), R(2, 2)),
    case(autocast_nested_disabled, R(2, 2), R(2, 2)),
    case(autocast_decorator_on_helper, R(2, 2), R(2, 2)),
    case(no_grad_then_backward_graph, R(3, requires_grad=True)),
    case(attribute_shape_dtype_device, R(2, 3)),
    case(attribute_shape_arithmetic, R(2, 3)),
    case(attribute_transpose, R(2, 3)),
    case(attribute_requires_grad, R(3, requires_grad=True)),
    case(attribute_dtype_properties, R(3)),
    case(attribute_device_type, R(3)),
    case(attribute_grad_fn_none, R(3)),
    case(operators_arithmetic, R(3), R(3)),
    case(operators_comparison, R(3), R(3)),
    case(operators_bitwise, R(4, dtype=torch.bool), R(4, dtype=torch.bool)),
    case(operators_integer, R(4, dtype=torch.int64)),
    case(operators_matmul, R(2, 3), R(3, 2)),
    case(operators_reflected_scalars, R(3)),
    case(module_argument_call, torch.nn.Linear(3, 2), R(4, 3)),
    case(module_parameters_read, torch.nn.Linear(3, 2), R(4, 3)),
]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_tensors(case):
    run_case(case)
