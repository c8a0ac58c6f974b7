"""DirectML for real: Microsoft's DirectML.dll and onnxruntime.dll run by the project's own host
programs (hosts/*.c), natively on Windows and under Wine elsewhere. `make directml` (setup.py)
fills one folder (home.py); wine.py runs a host as a long-lived process spoken to over a pipe."""
