// The rate of ISA-L's crc32_iscsi (CRC32C) and of memcpy on one core, for
// the price of `verify-transfers=on` (cost/Collectives.cpp,
// verifyTransferSeconds). See bench/crc32c-rate.sh.
#include <isa-l/crc.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  for (size_t Bytes : {size_t(64) << 10, size_t(4) << 20, size_t(64) << 20}) {
    std::vector<unsigned char> Src(Bytes, 7), Dst(Bytes);
    int Reps = int((size_t(1) << 31) / Bytes);
    unsigned Sink = 0;
    auto T0 = std::chrono::steady_clock::now();
    for (int I = 0; I < Reps; ++I)
      Sink ^= crc32_iscsi(Src.data(), Bytes, 0xffffffff);
    auto T1 = std::chrono::steady_clock::now();
    for (int I = 0; I < Reps; ++I) {
      std::memcpy(Dst.data(), Src.data(), Bytes);
      Sink ^= Dst[size_t(I) % Bytes];
    }
    auto T2 = std::chrono::steady_clock::now();
    double Crc = std::chrono::duration<double>(T1 - T0).count();
    double Copy = std::chrono::duration<double>(T2 - T1).count();
    std::printf("%6zu KiB: crc32c %5.1f GB/s, memcpy %5.1f GB/s%s\n",
                Bytes >> 10, Reps * double(Bytes) / Crc / 1e9,
                Reps * double(Bytes) / Copy / 1e9, Sink == 1 ? " " : "");
  }
}
