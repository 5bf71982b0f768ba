//! Capability fallbacks, for the thread balancer: a C program that takes
//! a software path because the core it runs on lacks an instruction set
//! extension says so with `hs_report_capability_fallback`, and
//! `hetsched balance` (Kinship) keeps the thread off cores like that one.

use crate::error::{HsResult, HsStatus, err, guard};
use hetsched_core::balance::Category;

/// A fallback for SIMD work (the core lacks AVX2, AVX-512 or FMA).
pub const HS_FALLBACK_VECTOR: u32 = 1 << 0;
/// A fallback for cryptography (the core lacks AES or SHA instructions).
pub const HS_FALLBACK_CRYPTO: u32 = 1 << 1;
/// A fallback for double-precision floating point.
pub const HS_FALLBACK_FLOAT64: u32 = 1 << 2;

const KNOWN: u32 = HS_FALLBACK_VECTOR | HS_FALLBACK_CRYPTO | HS_FALLBACK_FLOAT64;

fn category(bits: u32) -> HsResult<Category> {
    if bits & !KNOWN != 0 {
        return err(
            HsStatus::HsErrInvalid,
            format!("unknown fallback categories {bits:#x}: use HS_FALLBACK_* bits"),
        );
    }
    // Each HS_FALLBACK_* bit is the balancer's category bit of that name.
    Ok(Category(bits as u8))
}

/// Counts one fallback of the calling thread, on the CPU it runs on, for
/// work of `categories` (HS_FALLBACK_* bits, OR-ed). Cheap enough to call
/// on every fallback. HS_ERR_INVALID for bits that are no category;
/// otherwise HS_OK, also when the process cannot keep a fault ledger (the
/// report is then lost, never the program's work).
#[unsafe(no_mangle)]
pub extern "C" fn hs_report_capability_fallback(categories: u32) -> HsStatus {
    guard(|| {
        hetsched_runtime::report_capability_fallback(category(categories)?);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_bits_are_the_balancers_categories() {
        assert_eq!(category(HS_FALLBACK_CRYPTO).unwrap(), Category::CRYPTO);
        assert_eq!(category(HS_FALLBACK_VECTOR).unwrap(), Category::VECTOR);
        assert_eq!(category(HS_FALLBACK_FLOAT64).unwrap(), Category::FLOAT64);
        assert_eq!(
            hs_report_capability_fallback(1 << 9),
            HsStatus::HsErrInvalid
        );
    }
}
