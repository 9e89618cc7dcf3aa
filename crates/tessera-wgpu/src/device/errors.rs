//! Decoding a launch's status into the error of its first failing invocation.

use super::*;

impl WgpuDevice {
    /// The error of the launch's first failing invocation (launch order), as the CPU backend
    /// reports it. The status words hold it exactly where one invocation failed; where several
    /// did, they raced for the words, so the first one is run again alone.
    pub(super) fn first_error(
        &mut self,
        l: &Launch,
        wgsl: &WgslKernel,
        status: Status,
    ) -> RuntimeError {
        if status.failed.0 == 1 {
            return self.kernel_error(l, status);
        }
        let i = status.first.0 as u64;
        let at = match &l.domain {
            Domain::Rect { x0, y0, x1, .. } => {
                let w = (x1 - x0) as u64;
                Some((x0 + (i % w) as u32, y0 + (i / w) as u32))
            }
            Domain::List(items) => items.get(i as usize).copied(),
        };
        let Some(at) = at else {
            return self.kernel_error(l, status);
        };
        let temp_len = self.temp_len;
        let alone = Domain::List(std::sync::Arc::new(vec![at]));
        let again = self
            .work(l, &alone, wgsl)
            .and_then(|mut w| self.launch_once(&mut w, MAX_STORES as u64));
        // It wrote no page (it fails before committing) and leaves the temporary as it was.
        self.temp_len = temp_len;
        match again {
            Ok(Ran::Failed(alone)) if alone.failed.0 == 1 => self.kernel_error(l, alone),
            // Not failing alone: it read what another invocation of the launch wrote, a race
            // the program must avoid; any failing invocation's error is then as good.
            Ok(_) => self.kernel_error(l, status),
            Err(e) => e,
        }
    }

    /// The typed error a failing invocation's status words describe.
    pub(super) fn kernel_error(&self, l: &Launch, st: Status) -> RuntimeError {
        let kernel = l.kernel.name().to_string();
        let object = ObjectId(st.error_object.0);
        let bound = l.bindings.iter().find(|b| b.id == object);
        match (st.error_kind.0, bound) {
            (abi::ERR_UNBOUND, _) => RuntimeError::Unbound { kernel, object },
            (abi::ERR_TOO_MANY_STORES, _) => RuntimeError::TooManyStores {
                kernel,
                max: MAX_STORES,
            },
            (abi::ERR_OUT_OF_RANGE, Some(b)) => RuntimeError::Kernel {
                kernel,
                source: CoreError::OutOfRange {
                    object,
                    x: st.error_x.0 as u64,
                    y: st.error_y.0 as u64,
                    width: b.width(),
                    height: b.height(),
                    buffer: b.is_buffer(),
                },
            },
            (abi::ERR_LEVEL, Some(b)) => {
                let Some((layout, _)) = b.mip() else {
                    return self.err(WgpuError::LevelErrorWithoutLevels { kernel, object });
                };
                let level = st.error_format.0;
                let source = match layout.extent(level) {
                    Ok((width, height)) => CoreError::TexelOutOfLevel {
                        level,
                        s: st.error_x.0 as u64,
                        t: st.error_y.0 as u64,
                        width,
                        height,
                    },
                    Err(e) => e,
                };
                RuntimeError::Kernel { kernel, source }
            }
            (abi::ERR_WRONG_FORMAT, Some(b)) if st.error_format.0 == abi::FORMAT_MIPMAPPED => {
                RuntimeError::Kernel {
                    kernel,
                    source: CoreError::WrongKind {
                        object,
                        expected: tessera_runtime::MIPMAPPED,
                        actual: kind_name(b.format()),
                    },
                }
            }
            (abi::ERR_WRONG_FORMAT, Some(b)) => match abi::format_of(st.error_format.0) {
                Some(expected) => RuntimeError::Kernel {
                    kernel,
                    source: CoreError::WrongKind {
                        object,
                        expected: kind_name(expected),
                        actual: if b.mip().is_some() {
                            tessera_runtime::MIPMAPPED
                        } else {
                            kind_name(b.format())
                        },
                    },
                },
                None => self.err(WgpuError::UnknownFormatCode {
                    kernel,
                    code: st.error_format.0,
                }),
            },
            (code, _) => self.err(WgpuError::UndecodableError {
                kernel,
                code,
                object,
            }),
        }
    }
}
