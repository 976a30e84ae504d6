

def test_node_shapes_use_the_gpu_catalog_figures():
    from hetopt.hardware import load_gpus
    from hetopt.islands import catalog as cat

    gpus = load_gpus()
    shapes = {name: getattr(cat, name) for name in dir(cat) if isinstance(getattr(cat, name), cat.Shape)}
    assert set(shapes) == set(cat.CATALOG_NAME)
    for name, shape in shapes.items():
        gpu = gpus[cat.CATALOG_NAME[name]]
        assert shape.tflops == gpu.training_flops / 1e12, name
        assert shape.memory_gib == gpu.memory_bytes / 2**30, name
        assert shape.intra_gbs == gpu.intra_bandwidth / 1e9, name
