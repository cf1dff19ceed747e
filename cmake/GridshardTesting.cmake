# gridshard_add_mpi_test(<name> [RANKS n...] [SKIP_MESHES DxHxW... tcp.npN...] [TIMEOUT seconds]
#                        [ENVIRONMENT VAR=value...] [FIXTURES_REQUIRED fixture] [COMMAND program args...])
#
# Registers the MPI test binary <name> (or, with COMMAND, that command line: a pytest suite, say) once per
# (rank count, mesh shape): one ctest entry each, named <name>.np<N>.<DxHxW>, run as
# `mpiexec -n N <binary or command> --mesh=DxHxW`. Default rank counts are
# 1 2 3 4 6 8 with several mesh shapes each, odd ones included. Open MPI gets --oversubscribe (the
# machines have fewer cores than ranks) and may run as root; busy polling is never forced. With Open MPI,
# the 4-rank runs are registered once more on their first mesh with TCP as the only transport
# (<name>.tcp.np4.1x2x2), as ranks on different nodes talk. SKIP_MESHES leaves out meshes (and the TCP run,
# tcp.np4) that a slow suite's other meshes already cover.
include_guard(GLOBAL)

set(GRIDSHARD_TEST_MESHES_1 "1x1x1")
set(GRIDSHARD_TEST_MESHES_2 "1x1x2;1x2x1;2x1x1")
set(GRIDSHARD_TEST_MESHES_3 "1x3x1;1x1x3;3x1x1")
set(GRIDSHARD_TEST_MESHES_4 "1x2x2;1x4x1;1x1x4;2x2x1;4x1x1")
# At 6 and 8 ranks the shapes that no smaller mesh has: three lon ranks beside a lat split (1x2x3), a lat rank with
# lat neighbours on both sides beside a lon split (1x3x2), data ranks beside an uneven lon split (3x1x2), and every
# axis split at once (2x2x2).
set(GRIDSHARD_TEST_MESHES_6 "1x2x3;1x3x2;3x1x2")
set(GRIDSHARD_TEST_MESHES_8 "2x2x2")

execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _gridshard_mpiexec_version
                ERROR_QUIET RESULT_VARIABLE _gridshard_mpiexec_result)
if(_gridshard_mpiexec_version MATCHES "Open MPI|OpenRTE")
    set(GRIDSHARD_MPIEXEC_FLAGS --oversubscribe)
    # Ranks as on different nodes: TCP between every pair (over loopback here), no shared memory.
    set(GRIDSHARD_TCP_FLAGS --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
    set(GRIDSHARD_MPI_TEST_ENVIRONMENT
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1)
else()
    set(GRIDSHARD_MPIEXEC_FLAGS)
    set(GRIDSHARD_TCP_FLAGS)
    set(GRIDSHARD_MPI_TEST_ENVIRONMENT)
endif()

# Open MPI's own start-up allocations are never freed and its plugins leave unsymbolisable stacks, so
# LeakSanitizer is off for MPI runs; address and undefined-behaviour checks stay on. The pure geometry
# and CLI tests keep leak detection.
if(GRIDSHARD_SANITIZE)
    list(APPEND GRIDSHARD_MPI_TEST_ENVIRONMENT ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1)
endif()

# One ctest entry: `mpiexec -n <ranks> [flags] <program> --mesh=<mesh>` named <name>, with the harness's
# environment, labels and properties.
function(_gridshard_add_mpi_run name ranks mesh program flags labels timeout environment fixtures)
    add_test(NAME ${name}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} ${GRIDSHARD_MPIEXEC_FLAGS} ${flags}
                     ${MPIEXEC_PREFLAGS} ${program} ${MPIEXEC_POSTFLAGS} --mesh=${mesh})
    set_tests_properties(${name} PROPERTIES
                         TIMEOUT ${timeout}
                         PROCESSORS ${ranks}
                         LABELS "${labels}"
                         ENVIRONMENT "${GRIDSHARD_MPI_TEST_ENVIRONMENT};${environment}")
    if(fixtures)
        set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED ${fixtures})
    endif()
endfunction()

function(gridshard_add_mpi_test target)
    cmake_parse_arguments(ARG "" "TIMEOUT;FIXTURES_REQUIRED" "RANKS;SKIP_MESHES;ENVIRONMENT;COMMAND" ${ARGN})
    if(ARG_COMMAND)
        set(program ${ARG_COMMAND})
    else()
        set(program $<TARGET_FILE:${target}>)
    endif()
    if(NOT ARG_RANKS)
        set(ARG_RANKS 1 2 3 4 6 8)
    endif()
    if(NOT ARG_TIMEOUT)
        set(ARG_TIMEOUT 120)
    endif()
    foreach(ranks IN LISTS ARG_RANKS)
        foreach(mesh IN LISTS GRIDSHARD_TEST_MESHES_${ranks})
            if(mesh IN_LIST ARG_SKIP_MESHES)
                continue()
            endif()
            _gridshard_add_mpi_run(${target}.np${ranks}.${mesh} ${ranks} ${mesh} "${program}" "" "mpi;np${ranks}"
                                   ${ARG_TIMEOUT} "${ARG_ENVIRONMENT}" "${ARG_FIXTURES_REQUIRED}")
        endforeach()
        # At 4 ranks, the first mesh (1x2x2: both splits) again with the ranks talking over TCP only (Open MPI).
        list(GET GRIDSHARD_TEST_MESHES_${ranks} 0 first_mesh)
        if(GRIDSHARD_TCP_FLAGS AND ranks EQUAL 4 AND NOT "tcp.np${ranks}" IN_LIST ARG_SKIP_MESHES)
            _gridshard_add_mpi_run(${target}.tcp.np${ranks}.${first_mesh} ${ranks} ${first_mesh} "${program}"
                                   "${GRIDSHARD_TCP_FLAGS}" "mpi;tcp;np${ranks}" ${ARG_TIMEOUT} "${ARG_ENVIRONMENT}"
                                   "${ARG_FIXTURES_REQUIRED}")
        endif()
    endforeach()
endfunction()
