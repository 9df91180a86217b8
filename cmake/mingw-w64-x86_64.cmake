# A toolchain file for building dsh_session for Windows x86_64 on Linux
# with mingw-w64 (Debian: mingw-w64) and cargo's x86_64-pc-windows-gnu
# target (rustup target add x86_64-pc-windows-gnu):
#
#   cmake -S . -B build/windows -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64-x86_64.cmake
#
# ctest runs the Windows programs under Wine (CMAKE_CROSSCOMPILING_EMULATOR);
# scripts/test-windows.sh sets Wine up. A consumer project uses the same
# file and finds the installed package through CMAKE_PREFIX_PATH.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
# The posix thread model (winpthreads): with the win32 one, GCC 12's
# libstdc++ has no std::mutex, which dsh_session.hpp uses.
set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc-posix)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++-posix)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)

# Libraries and headers of the target from the mingw-w64 sysroot only;
# programs (cargo, wine) from the host; packages from both (an install
# prefix given in CMAKE_PREFIX_PATH is not under the sysroot).
set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# Programs link MinGW's own libraries (GCC's runtime, winpthreads)
# statically, so none of its DLLs has to be beside them; dsh_session.dll
# is linked through its import library all the same.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

set(CMAKE_CROSSCOMPILING_EMULATOR wine)

# The cargo target of dsh_session's CMakeLists.txt.
set(DSH_CARGO_TARGET x86_64-pc-windows-gnu CACHE STRING "The rustc target cargo builds for")
