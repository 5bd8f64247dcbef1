/* p32.S - the probe embedded in test_docker_seccomp.c (p32_hex): socketcall(SYS_SOCKET,
 * {AF_VSOCK, SOCK_STREAM, 0}) through the 32-bit entry; exit 0 opened, 1 refused.
 * gcc -nostdlib -static -no-pie -s -Wl,--build-id=none -Wl,-n -Wl,-z,norelro
 *     -Wl,-z,noseparate-code -o p32 p32.S */
    .globl _start
    .text
_start:
    mov $102, %eax          /* socketcall, through the 32-bit entry */
    mov $1, %ebx            /* SYS_SOCKET */
    mov $args, %ecx
    int $0x80
    xor %edi, %edi
    test %eax, %eax
    jns 1f
    mov $1, %edi
1:  mov $60, %eax           /* exit */
    syscall
args: .long 40, 1, 0        /* AF_VSOCK, SOCK_STREAM, 0 */
