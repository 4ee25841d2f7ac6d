"""The torch references the tests hold npsco's numpy updates against (autograd, the torch optimiser): the learner's
epochs (`torch_learner`), TNB's bisector step (`tnb`), CPO's trust-region quantities (`cpo`), and a method's whole
update with all of them in torch (`torch_update`). They are not part of the library: npsco trains with the numpy
updates only, which equal these up to float32 rounding (tests/unit/test_fast_update.py, test_fast_methods.py)."""
