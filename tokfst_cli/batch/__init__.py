"""Compiling many constraints at once (``tokfst compile-batch``): inputs and their keys, the task
one input is, and the executors that run the tasks (a local process pool, Ray, Dask)."""
