"""The analytical model: pure, vectorised numpy. No pydantic, no I/O, no logging in this package.

- :mod:`~gpusim.model.compute`: roofline per layer group, launch overheads, optimizer step
- :mod:`~gpusim.model.comm`: collectives in bus-bandwidth terms, ring / tree / NVLS / hierarchical
- :mod:`~gpusim.model.fabric`: node wiring -> achievable bus bandwidth
- :mod:`~gpusim.model.memory`: bytes per GPU per strategy
- :mod:`~gpusim.model.data`: data loader supply and wait
- :mod:`~gpusim.model.sync`: stragglers
- :mod:`~gpusim.model.step`: the composition into one optimizer step
"""
