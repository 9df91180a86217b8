/*
 * bcryptprimitives.dll for Wine 8, which lacks it: ProcessPrng, the
 * random source of Rust's std on Windows (and of getrandom), over
 * SystemFunction036 (RtlGenRandom, in advapi32). Placed next to the test
 * executables by scripts/test-windows.sh; Windows itself has the real DLL.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG n = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, n)) {
            return FALSE;
        }
        data += n;
        length -= n;
    }
    return TRUE;
}
