# Turns cargo's libdsh_session.a into an archive whose only global symbols are
# dsh_*, so a host that links its own SQLite (or another Rust staticlib) still
# links. Run as a script:
#
#   cmake -DINPUT=cargo/release/libdsh_session.a -DOUTPUT=stage/lib/libdsh_session.a \
#         -DLD=ld -DOBJCOPY=objcopy -DAR=ar -P cmake/DshLocalizeArchive.cmake
#
# 1. ld -r --whole-archive: one relocatable object holding every member, with
#    every internal reference (Rust std, the bundled SQLite, zstd) resolved
#    inside it;
# 2. objcopy -w --keep-global-symbol='dsh_*': every other defined symbol
#    becomes local (undefined ones, libc's, stay as they are); the .llvmbc /
#    .llvmcmd sections (embedded LLVM bitcode) go, as an LLVM plugin in ar or
#    ld would otherwise try to read them; with -DSTRIP_DEBUG=ON the debug
#    info goes too;
# 3. ar: a one-member archive again (deterministic).
cmake_minimum_required(VERSION 3.18)
foreach(_v INPUT OUTPUT LD OBJCOPY AR)
  if(NOT ${_v})
    message(FATAL_ERROR "DshLocalizeArchive.cmake: -D${_v}=... is required")
  endif()
endforeach()

get_filename_component(_dir "${OUTPUT}" DIRECTORY)
set(_work "${OUTPUT}.work")
file(REMOVE_RECURSE "${_work}")
file(MAKE_DIRECTORY "${_dir}" "${_work}")

function(_dsh_run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc ERROR_VARIABLE _err OUTPUT_VARIABLE _out)
  if(NOT _rc EQUAL 0)
    string(REPLACE ";" " " _cmd "${ARGN}")
    message(FATAL_ERROR "failed (${_rc}): ${_cmd}\n${_out}${_err}")
  endif()
endfunction()

_dsh_run("${LD}" -r --whole-archive "${INPUT}" -o "${_work}/whole.o")
set(_strip)
if(STRIP_DEBUG)
  set(_strip --strip-debug)
endif()
_dsh_run("${OBJCOPY}" -w "--keep-global-symbol=dsh_*" ${_strip}
         --remove-section=.llvmbc --remove-section=.llvmcmd
         "${_work}/whole.o" "${_work}/dsh_session.o")
file(REMOVE "${_work}/archive.a")
_dsh_run("${AR}" rcsD "${_work}/archive.a" "${_work}/dsh_session.o")
file(RENAME "${_work}/archive.a" "${OUTPUT}")
file(REMOVE_RECURSE "${_work}")
