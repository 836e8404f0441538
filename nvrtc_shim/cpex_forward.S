// __nvrtcCPEx: exported by NVRTC 13 for its own tools, its signature not
// published. Forwarded without knowing it: every register that may carry an
// argument is saved, the real address asked for (loading the real library on
// first use), the registers restored and the real function jumped to, so it
// sees exactly the call the program made (stack arguments included).
#if defined(__x86_64__)
    .text
    .globl __nvrtcCPEx
    .type __nvrtcCPEx, @function
__nvrtcCPEx:
    .cfi_startproc
    push %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    mov %rsp, %rbp
    .cfi_def_cfa_register %rbp
    sub $192, %rsp
    mov %rdi, 0(%rsp)
    mov %rsi, 8(%rsp)
    mov %rdx, 16(%rsp)
    mov %rcx, 24(%rsp)
    mov %r8, 32(%rsp)
    mov %r9, 40(%rsp)
    mov %rax, 48(%rsp)
    mov %r10, 56(%rsp)
    movdqu %xmm0, 64(%rsp)
    movdqu %xmm1, 80(%rsp)
    movdqu %xmm2, 96(%rsp)
    movdqu %xmm3, 112(%rsp)
    movdqu %xmm4, 128(%rsp)
    movdqu %xmm5, 144(%rsp)
    movdqu %xmm6, 160(%rsp)
    movdqu %xmm7, 176(%rsp)
    call kcache_nvrtc_shim_cpex_target@PLT
    mov %rax, %r11
    mov 0(%rsp), %rdi
    mov 8(%rsp), %rsi
    mov 16(%rsp), %rdx
    mov 24(%rsp), %rcx
    mov 32(%rsp), %r8
    mov 40(%rsp), %r9
    mov 48(%rsp), %rax
    mov 56(%rsp), %r10
    movdqu 64(%rsp), %xmm0
    movdqu 80(%rsp), %xmm1
    movdqu 96(%rsp), %xmm2
    movdqu 112(%rsp), %xmm3
    movdqu 128(%rsp), %xmm4
    movdqu 144(%rsp), %xmm5
    movdqu 160(%rsp), %xmm6
    movdqu 176(%rsp), %xmm7
    leave
    .cfi_def_cfa %rsp, 8
    test %r11, %r11
    jz 1f
    jmp *%r11
1:
    mov $11, %eax  // NVRTC_ERROR_INTERNAL_ERROR: no real library (said on stderr)
    ret
    .cfi_endproc
    .size __nvrtcCPEx, .-__nvrtcCPEx
#else
#error "the drop-in libnvrtc forwards __nvrtcCPEx on x86-64 only; port cpex_forward.S"
#endif
    .section .note.GNU-stack,"",@progbits
