//! ISA capability bits of this machine's CPUs, from cpuid (via std's
//! run-time feature detection, which needs no unsafe and caches the answer).
//!
//! Hybrid CPUs expose one ISA on all their cores (that is why Alder Lake
//! disables AVX-512), so one answer holds for every CPU kind.

use hetsched_core::unit::Capabilities;

/// Capabilities of the CPUs this process runs on. FP64 is always present.
pub fn detect_cpu_caps() -> Capabilities {
    let caps = Capabilities::FP64;
    #[cfg(target_arch = "x86_64")]
    let caps = {
        let mut caps = caps;
        let found = [
            (
                std::arch::is_x86_feature_detected!("aes"),
                Capabilities::AES,
            ),
            (
                std::arch::is_x86_feature_detected!("avx2"),
                Capabilities::AVX2,
            ),
            (
                std::arch::is_x86_feature_detected!("avx512f"),
                Capabilities::AVX512,
            ),
            (
                std::arch::is_x86_feature_detected!("sha"),
                Capabilities::SHA,
            ),
            (
                std::arch::is_x86_feature_detected!("fma"),
                Capabilities::FMA,
            ),
        ];
        for (present, cap) in found {
            if present {
                caps = caps.union(cap);
            }
        }
        caps
    };
    #[cfg(target_arch = "aarch64")]
    let caps = {
        let mut caps = caps;
        // NEON always has fused multiply-add on AArch64.
        caps = caps.union(Capabilities::FMA);
        if std::arch::is_aarch64_feature_detected!("aes") {
            caps = caps.union(Capabilities::AES);
        }
        if std::arch::is_aarch64_feature_detected!("sha2") {
            caps = caps.union(Capabilities::SHA);
        }
        caps
    };
    caps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp64_always_present() {
        assert!(detect_cpu_caps().contains(Capabilities::FP64));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn matches_std_detection() {
        let caps = detect_cpu_caps();
        assert_eq!(
            caps.contains(Capabilities::AVX2),
            std::arch::is_x86_feature_detected!("avx2")
        );
        assert_eq!(
            caps.contains(Capabilities::AVX512),
            std::arch::is_x86_feature_detected!("avx512f")
        );
    }
}
