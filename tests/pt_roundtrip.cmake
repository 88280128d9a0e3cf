# Optional (-DCT_TEST_PT_TORCH=ON): PyTorch reads back what ct_save_pt writes. Off by
# default because importing torch alone takes seconds; the script exits 77 (skipped)
# where /usr/bin/python3 cannot import torch.
option(CT_TEST_PT_TORCH "Check .pt files written by ctorch with the installed PyTorch" OFF)
if(CT_TEST_PT_TORCH AND EXISTS /usr/bin/python3 AND TARGET test_pt)
  add_test(NAME pt_torch_roundtrip
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/golden/check_pt_roundtrip.py $<TARGET_FILE:test_pt>)
  set_tests_properties(pt_torch_roundtrip PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()
