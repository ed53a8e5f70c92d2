"""A key/value cache that grows in place: attention over cuvmm_torch.GrowableTensor caches, eagerly
and through a CUDA graph captured before the caches grew.

    python3 examples/torch_kv_cache.py         (cuvmm_torch installed or on PYTHONPATH; needs a GPU)

Each cache is a GrowableTensor of rows (heads, head_dim): appending a token's key maps memory behind
the end when needed, copies only the new row and returns cache.tensor, an ordinary tensor over all
rows, so scaled_dot_product_attention reads it as is. The address never changes, so a CUDA graph
captured over the first rows still reads and writes the same memory after the cache has grown.
"""
import torch
import torch.nn.functional as F

import cuvmm_torch

heads, head_dim, dev = 8, 128, torch.device("cuda")
keys = cuvmm_torch.GrowableTensor((heads, head_dim), torch.bfloat16, dev, max_rows=1 << 20)
values = cuvmm_torch.GrowableTensor((heads, head_dim), torch.bfloat16, dev, max_rows=1 << 20)
address = keys.data_ptr()


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """q (heads, 1, head_dim) over k, v (tokens, heads, head_dim)."""
    return F.scaled_dot_product_attention(q[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None])[0]


# Decoding: one token's key and value appended per step, attention over the whole cache.
for step in range(1000):
    k, v, q = torch.randn(3, 1, heads, head_dim, dtype=torch.bfloat16, device=dev)
    out = attend(q.transpose(0, 1), keys.append(k), values.append(v))  # append returns all rows
print(f"{len(keys)} tokens cached, {keys.stats()['capacity_bytes'] >> 20} MiB mapped per cache, "
      f"address unchanged: {keys.data_ptr() == address}")

# A graph over the first 1000 rows, captured now and replayed after the cache grew tenfold.
prefix_k, prefix_v = keys.view(0, 1000), values.view(0, 1000)
q = torch.randn(heads, 1, head_dim, dtype=torch.bfloat16, device=dev)
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    attend(q, prefix_k, prefix_v)  # warm-up before capture
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
# thread_local: cuvmm's mapping thread may be mapping the caches' next step meanwhile; a global-mode
# capture would refuse driver calls from every thread.
with torch.cuda.graph(graph, capture_error_mode="thread_local"):
    captured = attend(q, prefix_k, prefix_v)
keys.append(torch.randn(9000, heads, head_dim, dtype=torch.bfloat16, device=dev))
values.append(torch.randn(9000, heads, head_dim, dtype=torch.bfloat16, device=dev))
graph.replay()
expected = attend(q, keys.view(0, 1000), values.view(0, 1000))
print(f"after growing to {len(keys)} tokens the graph's result is exact: {torch.equal(captured, expected)}")
print("torch.cuda.memory_allocated() does not count the caches; keys.stats() does:",
      {k: keys.stats()[k] for k in ("capacity_bytes", "bytes_prepared", "max_capacity_bytes")})
