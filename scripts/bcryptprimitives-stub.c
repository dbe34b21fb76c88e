/* A stand-in bcryptprimitives.dll for running the Windows build under Wine older than 9.0.
 *
 * Rust's std (1.78 and later) takes its random bytes (HashMap seeds and the like) from
 * ProcessPrng in bcryptprimitives.dll, which every Windows 10+ has but Wine 8 does not: the .exe
 * then stops at load time (exit code 53). scripts/windows-check.sh builds this file with MinGW
 * and puts the DLL next to the .exe under test; Windows itself never sees it.
 * ProcessPrng is answered with RtlGenRandom (exported by advapi32 as SystemFunction036). */
#include <windows.h>

BOOLEAN NTAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE out, SIZE_T length) {
    /* RtlGenRandom takes a ULONG length: fill a large request in slices. */
    const SIZE_T slice = 1u << 30;
    while (length > 0) {
        ULONG now = (ULONG)(length < slice ? length : slice);
        if (!SystemFunction036(out, now)) {
            return FALSE;
        }
        out += now;
        length -= now;
    }
    return TRUE;
}
