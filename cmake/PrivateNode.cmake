# Find the number N of rdma-core's private version node IBVERBS_PRIVATE_N in
# the system's libibverbs.so.1 (Debian's libibverbs1). Providers such as
# libmlx5 import that node, so our library must define the same one.
execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libibverbs.so.1
                OUTPUT_VARIABLE SV_SYSTEM_IBVERBS OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT EXISTS "${SV_SYSTEM_IBVERBS}")
  find_file(SV_SYSTEM_IBVERBS libibverbs.so.1
            PATHS /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib REQUIRED)
endif()
find_program(SV_OBJDUMP objdump REQUIRED)
execute_process(COMMAND ${SV_OBJDUMP} -p ${SV_SYSTEM_IBVERBS}
                OUTPUT_VARIABLE _sv_pvt RESULT_VARIABLE _sv_rc)
string(REGEX MATCH "IBVERBS_PRIVATE_([0-9]+)" _sv_m "${_sv_pvt}")
if(NOT _sv_m)
  message(FATAL_ERROR "cannot find IBVERBS_PRIVATE_N in ${SV_SYSTEM_IBVERBS}")
endif()
set(SV_PRIVATE_NUM ${CMAKE_MATCH_1})
message(STATUS "rdma-core private node: IBVERBS_PRIVATE_${SV_PRIVATE_NUM} (from ${SV_SYSTEM_IBVERBS})")
