"""What run.json says about the machine."""

from toolmatrix.runinfo import gpus, hardware


def test_gpus_are_read_from_nvidia_smi(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpus() == [] and hardware()["gpus"] == []  # no nvidia-smi: no GPU, no error
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 81559 MiB, 570.86.15'\necho 'NVIDIA H100 80GB HBM3, 81559 MiB, 570.86.15'\n")
    smi.chmod(0o755)
    assert gpus() == [{"name": "NVIDIA H100 80GB HBM3", "memory": "81559 MiB", "driver": "570.86.15"}] * 2
